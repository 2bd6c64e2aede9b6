"""A watcher of the CDC slots that runs under Celery beat, independent of the relay: a stopped or
stuck relay lets its slot hold WAL back, and this logs it (error above CDC_MAX_LAG_BYTES)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from merchant_platform.cdc.captures import default_slot_name, service_captures
from merchant_platform.cdc.relay import connect, slot_lag
from merchant_platform.celery import register_periodic_task
from merchant_platform.logging import get_logger
from merchant_platform.registry import active_services

log = get_logger(__name__)
CHECK_INTERVAL_SECONDS = 60.0


@shared_task(name="merchant_platform.cdc.check_slot_lag", ignore_result=True)
def check_slot_lag() -> list[dict]:
    states = []
    for service in active_services():
        if not service_captures(service):
            continue
        slot = settings.CDC_SLOT_NAME or default_slot_name(service)
        with connect(service.db_alias) as connection:
            state = slot_lag(connection, slot)
        if state is None:
            log.warning("cdc.slot_missing", service=service.name, slot=slot)
            continue
        if state["lagBytes"] > settings.CDC_MAX_LAG_BYTES:
            log.error("cdc.lag_too_high", service=service.name, maxLagBytes=settings.CDC_MAX_LAG_BYTES, **state)
        else:
            log.info("cdc.lag", service=service.name, **state)
        states.append(state)
    return states


register_periodic_task("merchant_platform.cdc.check_slot_lag", task=check_slot_lag.name, schedule=CHECK_INTERVAL_SECONDS)
