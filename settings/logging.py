"""Structured key=value logs on stdout (spec 1.2.5), through structlog."""

from settings.env import env

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO").upper()
# The per-request line is flushed at most this often (0: after each line); see RequestLineWriter.
LOG_REQUEST_FLUSH_SECONDS = env.float("LOG_REQUEST_FLUSH_SECONDS", default=1.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"key_value": {"()": "merchant_platform.logging.key_value_formatter"}},
    "handlers": {"stdout": {"class": "merchant_platform.logging.StdoutHandler", "stream": "ext://sys.stdout", "formatter": "key_value"}},
    "root": {"handlers": ["stdout"], "level": LOG_LEVEL},
    "loggers": {
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "WARNING"},
        "kafka": {"level": "WARNING"},
        "celery": {"level": "INFO"},
    },
}

# Prometheus metrics at GET /metrics (merchant_platform/metrics.py; docs/operations.md, "Alerts"):
# off unless enabled (OUTREACH_METRICS_ENABLED, the spec's name, turns it on too). The consumer-lag
# gauge asks the broker at each scrape; METRICS_CONSUMER_LAG=false leaves it out.
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=False)
METRICS_CONSUMER_LAG = env.bool("METRICS_CONSUMER_LAG", default=True)
