"""Prometheus counters of the service, on the process's GET /metrics (merchant_platform/metrics.py),
served when OUTREACH_METRICS_ENABLED (spec 4.1) or METRICS_ENABLED is on."""

from __future__ import annotations

from prometheus_client import Counter

INQUIRIES = Counter("outreach_inquiries_submitted_total", "Inquiries accepted through the public form.")
SUBSCRIBER_ACTIONS = Counter(
    "outreach_subscriber_requests_total", "Public subscription requests, by action (subscribe, confirm, unsubscribe).", ["action"]
)
MAIL = Counter("outreach_mail_total", "Subscription messages, by result (sent, failed, dropped, disabled).", ["result"])
