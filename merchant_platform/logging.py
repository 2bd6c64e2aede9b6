"""Structured logging: one key=value line per event on stdout.

structlog renders both our own events and the standard library's (Django, Celery, kafka-python), and
adds the requestId bound in merchant_platform.context, so every line of a request, task or message
carries it. The per-request line skips the standard library and structlog (see RequestLogger).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from datetime import UTC, datetime

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
    """Where RequestLogger puts the request lines: a buffer of its own, written to the current
    sys.stdout in one write and flush at most every `flush_seconds` (0: each line at once).

    A write per line is a system call per request, which under load also hands the GIL to the
    server's other thread (docs/performance.md, "base"). The buffer is this writer's, not stdout's:
    PYTHONUNBUFFERED=1 (set by deploy/Dockerfile, as in most container images) turns every write to
    sys.stdout into a system call. Lines stay in order with the other log lines, which drain the
    buffer before they are written (`StdoutHandler`); a background thread drains it every
    `flush_seconds`, as does the interpreter's exit. A process killed outright loses at most
    `flush_seconds` of request lines, as nginx's buffered access log does."""

    MAX_PENDING_LINES = 1000  # written at once past this, whatever the interval

    def __init__(self, flush_seconds: float):
        self.flush_seconds = flush_seconds
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._flusher_started = False
        _WRITERS.add(self)

    def msg(self, message: str) -> None:
        with self._lock:
            self._pending.append(message + "\n")
            if self.flush_seconds <= 0 or len(self._pending) >= self.MAX_PENDING_LINES:
                self._write_pending()
            elif not self._flusher_started:
                self._flusher_started = True
                flusher_args = (weakref.ref(self), self.flush_seconds)
                threading.Thread(target=_flush_periodically, args=flusher_args, name="request-log-flush", daemon=True).start()

    def flush(self) -> None:
        """Write the pending lines now."""
        with self._lock:
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        text, self._pending = "".join(self._pending), []
        with contextlib.suppress(ValueError, OSError):  # a closed or broken stdout: nowhere to write
            sys.stdout.write(text)
            sys.stdout.flush()

    def __del__(self) -> None:
        self._write_pending()  # a writer dropped with its middleware still writes what it holds

    def _after_fork_in_child(self) -> None:
        # The parent's pending lines are the parent's to write; its lock may have been held mid-fork.
        self._lock = threading.Lock()
        self._pending = []
        self._flusher_started = False  # threads do not survive a fork


_WRITERS: weakref.WeakSet[RequestLineWriter] = weakref.WeakSet()


def _flush_periodically(writer_ref: weakref.ref[RequestLineWriter], seconds: float) -> None:
    # The thread holds its writer weakly, so a writer dropped with its middleware (a test client's,
    # a reloaded handler's) ends the thread instead of both living for good: the test suite's
    # process once held 450 of these threads, each waking every second for the GIL.
    while True:
        time.sleep(seconds)
        writer = writer_ref()
        if writer is None:
            return
        writer.flush()
        del writer  # not held while sleeping


def _writers() -> list[RequestLineWriter]:
    # Another thread adding a writer, or one dying there, can change the set during the copy
    # ("Set changed size during iteration", raised once in a Kafka client's IO thread that was
    # logging; WeakSet's own guard only covers removals, and not atomically). A retry gets a
    # whole copy: writers are created once per logger, so the set rarely changes.
    while True:
        try:
            return list(_WRITERS)
        except RuntimeError:
            continue


def flush_request_lines() -> None:
    """Write every request line still waiting in a RequestLineWriter (before another log line, at exit)."""
    for writer in _writers():
        writer.flush()


def _reset_writers_in_child() -> None:
    for writer in _writers():
        writer._after_fork_in_child()


atexit.register(flush_request_lines)
os.register_at_fork(after_in_child=_reset_writers_in_child)


class StdoutHandler(logging.StreamHandler):
    """The stdout handler of LOGGING: writes the request lines still buffered first, so the log
    stays in order."""

    def emit(self, record: logging.LogRecord) -> None:
        flush_request_lines()
        super().emit(record)


class RequestLogger:
    """The one line every request writes: the same text as get_logger(name).info("request", ...)
    renders (`_RENDERER`, keys in its order, values as repr), formatted directly and handed to a
    `RequestLineWriter`. For this fixed set of keys the f-string costs a fraction of structlog's
    processor chain and KeyValueRenderer (docs/performance.md); tests/kernel/test_logging.py checks
    both give the same line. It logs when the standard library's level for `name` allows INFO at
    construction (LOG_LEVEL), so build it after logging is configured (a middleware's __init__)."""

    def __init__(self, name: str, *, flush_seconds: float = 0):
        self.enabled = logging.getLogger(name).isEnabledFor(logging.INFO)
        self.writer = RequestLineWriter(flush_seconds)
        self._after_ts = f" level='info' event='request' logger={name!r}"

    def line(self, *, method: str, path: str, status: int, duration_ms: float) -> None:
        if not self.enabled:
            return
        ts = datetime.now(UTC).isoformat().replace("+00:00", "Z")  # as structlog's TimeStamper(fmt="iso", utc=True)
        request_id = current_request_id()
        request_id_pair = "" if request_id is None else f" requestId={request_id!r}"
        self.writer.msg(
            f"ts={ts!r}{self._after_ts}{request_id_pair} method={method!r} path={path!r} status={status!r} durationMs={duration_ms!r}"
        )
