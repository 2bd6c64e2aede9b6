"""Structured logging: one key=value line per event on stdout.

structlog renders both our own events and the standard library's (Django, Celery, kafka-python), and
adds the requestId bound in merchant_platform.context, so every line of a request, task or message
carries it. The per-request line skips the standard library (see request_logger).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time

import structlog

from merchant_platform.context import current_request_id


def add_request_id(logger, method_name: str, event_dict: dict) -> dict:
    request_id = current_request_id()
    if request_id is not None:
        event_dict.setdefault("requestId", request_id)
    return event_dict


_SHARED_PROCESSORS = [
    add_request_id,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
]

_KEY_ORDER = ["ts", "level", "event", "logger", "requestId"]
_RENDERER = structlog.processors.KeyValueRenderer(key_order=_KEY_ORDER, drop_missing=True)


def key_value_formatter() -> logging.Formatter:
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED_PROCESSORS,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _RENDERER,
        ],
    )


structlog.configure(
    processors=[
        structlog.stdlib.filter_by_level,
        *_SHARED_PROCESSORS,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.StackInfoRenderer(),
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ],
    logger_factory=structlog.stdlib.LoggerFactory(),
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)


class RequestLineWriter:
    """structlog's logger for the request line: writes the line to the current sys.stdout and
    flushes it at most every `flush_seconds` (0: after each line, as structlog's PrintLogger does).

    A flush per line is a write system call per request, which under load also hands the GIL to the
    server's other thread: about 50 µs of CPU per request on this machine, a fifth of a probe's
    (docs/performance.md). Lines wait in the stream's buffer instead, in order (any other log line
    flushes them with its own), until a background thread flushes them; the interpreter flushes
    them at exit. A process killed outright loses at most `flush_seconds` of request lines, as
    nginx's buffered access log does."""

    def __init__(self, flush_seconds: float):
        self.flush_seconds = flush_seconds
        self._lock = threading.Lock()
        self._flusher_pid: int | None = None

    def msg(self, message: str) -> None:
        stream = sys.stdout
        with self._lock:
            stream.write(message + "\n")
            if self.flush_seconds <= 0:
                stream.flush()
            elif self._flusher_pid != os.getpid():  # none yet in this process (a forked worker too)
                self._flusher_pid = os.getpid()
                threading.Thread(target=self._flush_periodically, name="request-log-flush", daemon=True).start()

    debug = info = warning = error = critical = exception = msg

    def _flush_periodically(self) -> None:
        while True:
            time.sleep(self.flush_seconds)
            with self._lock, contextlib.suppress(ValueError, OSError):  # a closed or broken stdout: nothing to flush to
                sys.stdout.flush()


def request_logger(name: str, *, flush_seconds: float = 0) -> structlog.typing.FilteringBoundLogger:
    """A logger for the one line every request writes: the same key=value line as get_logger's,
    rendered by structlog and written straight to the current stdout by a `RequestLineWriter`,
    without the standard library's records, handlers and ProcessorFormatter (about 20 µs less per
    request; docs/performance.md). Its level is the standard library's level for `name` when this is
    called (LOG_LEVEL), so call it after logging is configured (a middleware's __init__)."""
    return structlog.wrap_logger(
        RequestLineWriter(flush_seconds),
        processors=[
            add_request_id,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            _RENDERER,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLogger(name).getEffectiveLevel()),
    ).bind(logger=name)
