"""What operators watch of the event path, collected when the metrics page is scraped
(merchant_platform/metrics.py registers it)."""

from __future__ import annotations

from django.db import DatabaseError, router
from prometheus_client.core import GaugeMetricFamily

from merchant_platform.logging import get_logger

log = get_logger(__name__)
OUTBOX_PARKED = "merchant_platform_outbox_parked"


class OutboxParkedCollector:
    """Outbox rows the relay parked (it can never send them as they are), per outbox table of the
    active services: anything above 0 is an event no consumer got. A database that does not answer
    leaves the gauge out of the page (logged) rather than failing the scrape."""

    def describe(self):
        return [GaugeMetricFamily(OUTBOX_PARKED, "")]

    def collect(self):
        from merchant_platform.messaging.stores import outbox_models
        from merchant_platform.registry import active_services

        gauge = GaugeMetricFamily(OUTBOX_PARKED, "Outbox rows the relay parked: events it can never send as they are.", labels=["table"])
        aliases = {service.db_alias for service in active_services()} | {"default"}
        try:
            for model in outbox_models(aliases):
                parked = model.objects.using(router.db_for_write(model)).filter(parked_at__isnull=False).count()
                gauge.add_metric([model._meta.db_table], parked)
        except DatabaseError as exc:
            log.warning("metrics.outbox_parked_unavailable", error=type(exc).__name__)
            return
        yield gauge
