"""Celery tasks of payment: the schedulers on PAYMENT_SCHEDULER_QUEUE (QR expiry, resolution of
UNKNOWN attempts and PENDING refunds by asking the provider, the pending-queue gauge for the spec's alert) and webhook
deliveries on the `payment` queue. Tasks take ids and call services; they are idempotent (late
acknowledgement may run one twice)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.payment import services
from merchant_platform.celery import PAYMENT_SCHEDULER_QUEUE, register_periodic_task
from merchant_platform.logging import get_logger

log = get_logger(__name__)

PENDING_ALERT_THRESHOLD = 1000  # spec 8: payment queue pending above 1000


@shared_task(name="apps.payment.tasks.expire_attempts", named_queue=PAYMENT_SCHEDULER_QUEUE, ignore_result=True)
def expire_attempts() -> int:
    expired = services.attempts_expire()
    if expired:
        log.info("payment.attempts.expired", attempts=expired)
    return expired


@shared_task(name="apps.payment.tasks.resolve_unknown_attempts", named_queue=PAYMENT_SCHEDULER_QUEUE, ignore_result=True)
def resolve_unknown_attempts() -> int:
    """Ask the providers about UNKNOWN attempts, and about refunds PENDING for longer than any call takes."""
    return services.attempts_resolve_unknown() + services.refunds_resolve_pending()


@shared_task(name="apps.payment.tasks.report_pending_queue", named_queue=PAYMENT_SCHEDULER_QUEUE, ignore_result=True)
def report_pending_queue() -> int:
    pending = services.pending_queue_length()
    if pending > PENDING_ALERT_THRESHOLD:
        log.error("payment.queue.pending_too_high", pending=pending, threshold=PENDING_ALERT_THRESHOLD)
    else:
        log.info("payment.queue.pending", pending=pending)
    return pending


@shared_task(name=services.DELIVER_TASK, ignore_result=True)
def deliver_webhooks(*delivery_ids: int) -> int:
    """These deliveries (the events of one state change), with other due ones filling the batch."""
    services.webhook_task_started()
    return len(services.webhook_deliver_many(delivery_ids=list(delivery_ids)))


@shared_task(name="apps.payment.tasks.deliver_due_webhooks", ignore_result=True)
def deliver_due_webhooks() -> int:
    due = services.webhook_deliveries_due()
    batch = settings.PAYMENT_WEBHOOK_BATCH_SIZE
    for start in range(0, len(due), batch):
        deliver_webhooks.delay(*due[start : start + batch])
    return len(due)


def periodic_tasks(mode: str) -> list[tuple[str, float]]:
    """The beat jobs of a payment process in `mode` (spec 1.4): none in API mode."""
    if mode == "API":
        return []
    interval = settings.PAYMENT_SCHEDULER_INTERVAL_SECONDS
    return [
        (expire_attempts.name, interval),
        (resolve_unknown_attempts.name, interval),
        (deliver_due_webhooks.name, interval),
        (report_pending_queue.name, 60.0),
    ]


for _task, _schedule in periodic_tasks(settings.PAYMENT_MODE):
    register_periodic_task(_task, task=_task, schedule=_schedule)
