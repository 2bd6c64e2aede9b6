"""Housekeeping of the consumers' idempotency records, under Celery beat.

A `ProcessedMessage` row lets a redelivered message be skipped. A message can be delivered again only
while its topic still holds it, so a row is useless once it is older than the topics' retention
(PROCESSED_MESSAGE_RETENTION_HOURS): this task deletes those rows every hour, as the outbox relay
deletes sent outbox rows after OUTBOX_RETENTION_HOURS.
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import router
from django.utils import timezone

from merchant_platform.celery import register_periodic_task
from merchant_platform.logging import get_logger
from merchant_platform.messaging.stores import processed_models
from merchant_platform.registry import active_services

log = get_logger(__name__)
PRUNE_INTERVAL_SECONDS = 3600.0
PRUNE_BATCH_SIZE = 10_000  # rows per DELETE: short statements, no long lock on a busy table


def prune_processed(model, *, before) -> int:
    """Delete `model`'s rows processed before `before`, a batch at a time; returns how many."""
    alias = router.db_for_write(model)
    manager = model.objects.using(alias)
    total = 0
    while True:
        ids = list(manager.filter(processed_at__lt=before).values_list("id", flat=True)[:PRUNE_BATCH_SIZE])
        if not ids:
            return total
        deleted, _ = manager.filter(id__in=ids).delete()
        total += deleted


@shared_task(name="merchant_platform.messaging.prune_processed_messages", ignore_result=True)
def prune_processed_messages() -> int:
    """Prune every processed-message table of the active services (and of `default`)."""
    before = timezone.now() - timedelta(hours=settings.PROCESSED_MESSAGE_RETENTION_HOURS)
    aliases = {service.db_alias for service in active_services()} | {"default"}
    total = 0
    for model in processed_models(aliases):
        deleted = prune_processed(model, before=before)
        if deleted:
            log.info("consumer.processed_pruned", table=model._meta.db_table, count=deleted)
        total += deleted
    return total


register_periodic_task(
    "merchant_platform.messaging.prune_processed_messages", task=prune_processed_messages.name, schedule=PRUNE_INTERVAL_SECONDS
)
