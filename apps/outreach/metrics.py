"""Prometheus counters of the service, exposed at GET /metrics when OUTREACH_METRICS_ENABLED is on
(spec 4.1). Under a pre-forking server set PROMETHEUS_MULTIPROC_DIR so every worker's counts add up."""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest, multiprocess
from prometheus_client import REGISTRY as DEFAULT_REGISTRY

INQUIRIES = Counter("outreach_inquiries_submitted_total", "Inquiries accepted through the public form.")
SUBSCRIBER_ACTIONS = Counter(
    "outreach_subscriber_requests_total", "Public subscription requests, by action (subscribe, confirm, unsubscribe).", ["action"]
)
MAIL = Counter("outreach_mail_total", "Subscription messages, by result (sent, failed, dropped, disabled).", ["result"])


def exposition() -> tuple[bytes, str]:
    """The metrics page: this process's registry, or every worker's when multiprocess mode is on."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = DEFAULT_REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST
