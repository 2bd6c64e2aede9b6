"""Prometheus gauge of payment (spec 8, payment queue alert): `payment_pending_queue`, the number of
attempts waiting for the provider (CREATED, UNKNOWN) plus webhook deliveries waiting to be sent,
counted when the page is scraped (two indexed counts), so every process serving the platform's
`GET /metrics` shows the same figure whichever process changed the rows. Alert rule: above 1,000."""

from __future__ import annotations

from django.db import DatabaseError
from prometheus_client.core import GaugeMetricFamily

from apps.payment import services
from merchant_platform.logging import get_logger
from merchant_platform.metrics import register_scrape_collector

log = get_logger(__name__)

PENDING_QUEUE = "payment_pending_queue"
WEBHOOK_WINDOW_SECONDS = 300


class PendingQueueCollector:
    """Collects the gauges at scrape time (also the webhook error ratio); a database that does not answer leaves it out of the page
    (logged) rather than failing the whole scrape."""

    def describe(self):
        return [GaugeMetricFamily(PENDING_QUEUE, ""), GaugeMetricFamily("payment_webhook_error_ratio", "")]

    def collect(self):
        try:
            pending = services.pending_queue_length()
            failed, tried = services.webhook_error_ratio(window_seconds=WEBHOOK_WINDOW_SECONDS)
        except DatabaseError as exc:
            log.warning("payment.metrics.pending_unavailable", error=type(exc).__name__)
            return
        yield GaugeMetricFamily(
            "payment_webhook_error_ratio",
            f"Share of the webhook deliveries tried in the last {WEBHOOK_WINDOW_SECONDS} s whose last try failed (spec 8: above 0.1).",
            value=failed / tried if tried else 0.0,
        )
        yield GaugeMetricFamily(
            PENDING_QUEUE,
            "Payment attempts waiting for the provider plus webhook deliveries waiting to be sent (spec 8: alert above 1000).",
            value=pending,
        )


# Registered once per process, when PaymentConfig.ready() imports this module.
register_scrape_collector(PendingQueueCollector())
