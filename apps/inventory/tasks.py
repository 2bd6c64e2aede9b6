"""Celery tasks of inventory (queue `inventory`), under beat: the release of expired reservations,
and the consumer-lag check behind the spec's alert (lag above 10,000, spec 8)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.inventory import consumers, services
from merchant_platform.celery import register_periodic_task
from merchant_platform.logging import get_logger
from merchant_platform.messaging.lag import group_lag
from merchant_platform.messaging.registry import registered_consumers

log = get_logger(__name__)


@shared_task(name="apps.inventory.tasks.expire_reservations", ignore_result=True)
def expire_reservations() -> int:
    return services.reservations_expire()


register_periodic_task(
    "apps.inventory.tasks.expire_reservations",
    task=expire_reservations.name,
    schedule=settings.INVENTORY_RESERVATION_SWEEP_SECONDS,
)


@shared_task(name="apps.inventory.tasks.check_consumer_lag", ignore_result=True)
def check_consumer_lag() -> dict[str, int]:
    """Log each inventory consumer's lag (`inventory.consumer_lag`), at error level above
    INVENTORY_CONSUMER_LAG_ALERT (`inventory.consumer_lag_too_high`): what the alert watches."""
    totals = {}
    for spec in registered_consumers(names=set(consumers.NAMES)):
        lag = group_lag(spec.group_id, spec.topics)
        total = sum(sum(partitions.values()) for partitions in lag.values())
        totals[spec.name] = total
        fields = {"consumer": spec.name, "group": spec.group_id, "lag": total, "partitions": lag}
        if total > settings.INVENTORY_CONSUMER_LAG_ALERT:
            log.error("inventory.consumer_lag_too_high", threshold=settings.INVENTORY_CONSUMER_LAG_ALERT, **fields)
        else:
            log.info("inventory.consumer_lag", **fields)
    return totals


register_periodic_task(
    "apps.inventory.tasks.check_consumer_lag",
    task=check_consumer_lag.name,
    schedule=settings.INVENTORY_CONSUMER_LAG_CHECK_SECONDS,
)
