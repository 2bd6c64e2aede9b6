"""Celery tasks of inventory (queue `inventory`): the release of expired reservations, under beat."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.inventory import services
from merchant_platform.celery import register_periodic_task


@shared_task(name="apps.inventory.tasks.expire_reservations", ignore_result=True)
def expire_reservations() -> int:
    return services.reservations_expire()


register_periodic_task(
    "apps.inventory.tasks.expire_reservations",
    task=expire_reservations.name,
    schedule=settings.INVENTORY_RESERVATION_SWEEP_SECONDS,
)
