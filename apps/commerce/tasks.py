"""Celery tasks of commerce (queue `commerce`): the sweep that removes the objects of deleted media."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.commerce import services
from merchant_platform.celery import register_periodic_task
from merchant_platform.logging import get_logger

log = get_logger(__name__)


@shared_task(name="apps.commerce.tasks.sweep_deleted_media", ignore_result=True)
def sweep_deleted_media() -> int:
    removed = services.media_sweep(grace_seconds=settings.COMMERCE_MEDIA_SWEEP_GRACE_SECONDS)
    if removed:
        log.info("commerce.media_objects_removed", objects=removed)
    return removed


register_periodic_task(
    "apps.commerce.tasks.sweep_deleted_media",
    task=sweep_deleted_media.name,
    schedule=settings.COMMERCE_MEDIA_SWEEP_INTERVAL_SECONDS,
)
