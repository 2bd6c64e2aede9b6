"""Celery tasks of licensing (queue `licensing`): the durable retry of certificate publication.

A certificate is published after each commit; when Redis fails then, the license keeps
`certificate_published_version < certificate_version` and this sweep, under Celery beat, publishes
(or withdraws) it again until Redis has it."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.licensing.certificates import publish_pending_certificates
from merchant_platform.celery import register_periodic_task
from merchant_platform.logging import get_logger

log = get_logger(__name__)


@shared_task(name="apps.licensing.tasks.publish_pending_certificates", ignore_result=True)
def publish_pending_certificates_task() -> int:
    published = publish_pending_certificates()
    if published:
        log.info("licensing.pending_certificates_published", licenses=published)
    return published


register_periodic_task(
    "apps.licensing.tasks.publish_pending_certificates",
    task=publish_pending_certificates_task.name,
    schedule=settings.LICENSING_CERTIFICATE_SWEEP_SECONDS,
)
