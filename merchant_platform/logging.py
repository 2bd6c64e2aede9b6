"""Structured logging: one key=value line per event on stdout.

structlog renders both our own events and the standard library's (Django, Celery, kafka-python), and
binds the request context (requestId, service) through context variables so every line of a request,
task or message carries it.
"""

from __future__ import annotations

import logging

import structlog

_SHARED_PROCESSORS = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
]

_KEY_ORDER = ["ts", "level", "event", "logger", "requestId"]


def key_value_formatter() -> logging.Formatter:
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED_PROCESSORS,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.KeyValueRenderer(key_order=_KEY_ORDER, drop_missing=True),
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
