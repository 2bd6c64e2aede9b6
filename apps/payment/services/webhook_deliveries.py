"""Webhook deliveries (spec 5, 6.1): rows written with the event they carry, sent once the state
change commits by Celery (apps/payment/tasks.py), retried with exponential backoff and jitter; and
the figures the spec's alerts watch."""

from __future__ import annotations

import json
import secrets
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import timedelta
from functools import lru_cache

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone
from django_redis import get_redis_connection
from redis import RedisError

from apps.payment import events, webhooks
from apps.payment.models import PaymentAttempt, WebhookConfig, WebhookDelivery
from apps.payment.services.records import DB, A
from apps.payment.services.webhook_configs import refuse_platform_owned
from merchant_platform import crypto
from merchant_platform.celery import send_task
from merchant_platform.errors import Conflict, NotFound
from merchant_platform.logging import get_logger

log = get_logger(__name__)

# The delivery task (apps/payment/tasks.py), sent by name: services never import their tasks.
DELIVER_TASK = "apps.payment.tasks.deliver_webhooks"


def _max_retries(config: WebhookConfig) -> int:
    value = (config.metadata or {}).get("maxRetries")
    return settings.PAYMENT_WEBHOOK_DEFAULT_MAX_RETRIES if value is None else int(value)


# Set while a delivery task is queued and has not started (a lost task holds others back no longer
# than its expiry; the beat sweep sends what is due meanwhile).
TASK_QUEUED_KEY = "mp:payment:webhook-task-queued"
TASK_QUEUED_SECONDS = 5


def webhook_dispatch(delivery_ids: list[int]) -> None:
    """Queue a delivery task for these deliveries, unless one is queued and has not started: that
    one takes them (a task fills its batch with every due delivery), so under load many state
    changes share one task instead of paying a task each. With Redis unreachable, queue anyway.
    Runs once the deliveries committed (`_dispatch_on_commit`; the flag must be read then, not
    before) or in a delivery task, so it sends at once."""
    try:
        if not get_redis_connection("default").set(TASK_QUEUED_KEY, 1, nx=True, ex=TASK_QUEUED_SECONDS):
            return
    except RedisError as exc:
        log.warning("payment.webhook.dispatch_flag_unavailable", error=type(exc).__name__)
    send_task(DELIVER_TASK, delivery_ids)


def webhook_task_started() -> None:
    """A delivery task starts: the next dispatch queues a new one (this one may claim before
    deliveries committed from now on)."""
    try:
        get_redis_connection("default").delete(TASK_QUEUED_KEY)
    except RedisError as exc:
        log.warning("payment.webhook.dispatch_flag_unavailable", error=type(exc).__name__)


def _dispatch_on_commit(delivery_ids: list[int]) -> None:
    # The beat sweep sends what this misses.
    transaction.on_commit(lambda: webhook_dispatch(delivery_ids), using=DB, robust=True)


class WebhookHandler(events.BatchHandler):
    """Payment events to the merchant's active webhooks subscribed to them: one delivery row each,
    written with the event, sent once the state change commits."""

    name = "webhooks"

    def handle_many(self, payloads: list[dict]) -> None:
        """One read of the merchant's active configs for the events of one state change."""
        configs_of: dict[int, list[WebhookConfig]] = {}
        now = timezone.now()
        deliveries = []
        for payload in payloads:
            merchant_id = int(events.merchant_of(payload))
            if merchant_id not in configs_of:
                configs_of[merchant_id] = list(
                    WebhookConfig.objects.using(DB).filter(merchant_id=merchant_id, status=WebhookConfig.Status.ACTIVE).order_by()
                )
            deliveries += [
                WebhookDelivery(
                    webhook=config,
                    merchant_id=merchant_id,
                    message_id="msg_" + secrets.token_hex(16),
                    event_type=payload["event"],
                    payload=payload,
                    next_attempt_at=now,
                )
                for config in configs_of[merchant_id]
                if payload["event"] in config.event_types or "*" in config.event_types
            ]
        if deliveries:
            WebhookDelivery.objects.using(DB).bulk_create(deliveries)
            _dispatch_on_commit([delivery.id for delivery in deliveries])


events.register_handler(WebhookHandler())


def _backoff(tries: int) -> float:
    base = settings.PAYMENT_WEBHOOK_RETRY_BASE_SECONDS * (2 ** (tries - 1))
    delay = min(base, settings.PAYMENT_WEBHOOK_MAX_DELAY_SECONDS)
    return delay * (0.8 + 0.4 * secrets.SystemRandom().random())  # +-20 % jitter


def webhook_deliver(*, delivery_id: int) -> WebhookDelivery | None:
    """Try one due delivery (webhook_deliver_many of it alone); None when it was not due, or when its
    lease ran out and it was taken over before the try was recorded."""
    tried = webhook_deliver_many(delivery_ids=[delivery_id], fill=False)
    return tried[0] if tried else None


RECORD_INTERVAL_SECONDS = 0.1


@lru_cache(maxsize=1)
def _senders() -> ThreadPoolExecutor:
    """This process's sending threads, made at the first batch (in a Celery worker's child, after the fork)."""
    return ThreadPoolExecutor(max_workers=settings.PAYMENT_WEBHOOK_SEND_CONCURRENCY, thread_name_prefix="webhook-send")


def webhook_deliver_many(*, delivery_ids: list[int], fill: bool = True) -> list[WebhookDelivery]:
    """Try due deliveries: `delivery_ids` and, with `fill`, other due ones up to
    PAYMENT_WEBHOOK_BATCH_SIZE (oldest first, skipping those another worker is claiming), so a busy
    worker sends many per task and the tasks of deliveries already sent find nothing to do.

    Claimed by one conditional UPDATE (a lease: two workers never send a delivery at once and a
    killed worker's deliveries are sent again after the lease), sent outside any database
    transaction and concurrently (a slow subscriber holds up no other delivery's try), then
    recorded every RECORD_INTERVAL_SECONDS, the tries finished by then in one UPDATE conditional on
    the lease still being ours: SUCCEEDED on 2xx, else retried with backoff until maxRetries, then
    FAILED. Returns the deliveries whose try was recorded."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.PAYMENT_WEBHOOK_LEASE_SECONDS)
    due = WebhookDelivery.objects.using(DB).filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
    claim = Q(pk__in=delivery_ids)
    room = settings.PAYMENT_WEBHOOK_BATCH_SIZE - len(delivery_ids)
    with transaction.atomic(using=DB):
        if fill and room > 0:
            others = due.exclude(pk__in=delivery_ids).order_by("next_attempt_at").select_for_update(skip_locked=True)
            claim |= Q(pk__in=others.values("pk")[:room])
        claimed = due.filter(claim).update(next_attempt_at=lease, updated_at=now)
    if not claimed:
        return []
    if fill and claimed >= settings.PAYMENT_WEBHOOK_BATCH_SIZE:
        webhook_dispatch([])  # more may be due: another worker takes the next batch while this one sends
    leased = WebhookDelivery.objects.using(DB).filter(status=WebhookDelivery.Status.PENDING, next_attempt_at=lease)
    inactive, sending, secrets_of = [], {}, {}
    for delivery in leased.select_related("webhook").order_by("id"):
        config = delivery.webhook
        if config.status != WebhookConfig.Status.ACTIVE:
            inactive.append((delivery, None))
            continue
        if config.id not in secrets_of:
            try:
                secrets_of[config.id] = crypto.decrypt(
                    config.secret, purpose=WebhookConfig.SECRET_PURPOSE, associated_data=str(config.id).encode()
                )
            except crypto.DecryptionFailed:
                secrets_of[config.id] = None
        sending[_senders().submit(_try, delivery, secrets_of[config.id])] = delivery
    recorded = _record_tries(lease, inactive) if inactive else []
    while sending:
        done, _pending = wait(sending, timeout=RECORD_INTERVAL_SECONDS)
        if done:
            recorded += _record_tries(lease, [(sending.pop(future), future.result()) for future in done])
    return recorded


def _try(delivery: WebhookDelivery, secret: str | None) -> webhooks.TryResult:
    if secret is None:
        return webhooks.TryResult(False, None, "decrypt failed", 0)
    config = delivery.webhook
    return webhooks.send(url=config.url, secret=secret, message_id=delivery.message_id, payload=delivery.payload, internal=config.internal)


# One UPDATE for a batch's tries, each row its own values, only rows still under our lease. (The ORM's
# bulk_update compiles a CASE branch per row and field: 7 ms of CPU per delivery here, more than the
# try itself; docs/performance.md, payment.)
RECORD_TRIES_SQL = """
    UPDATE webhook_delivery AS d
    SET attempt_count = v.attempt_count, last_status_code = v.last_status_code, last_error = v.last_error, log = v.log,
        status = v.status, next_attempt_at = v.next_attempt_at, updated_at = v.updated_at
    FROM unnest(%s::bigint[], %s::integer[], %s::integer[], %s::text[], %s::text[]::jsonb[], %s::text[],
                %s::timestamptz[], %s::timestamptz[])
        AS v(id, attempt_count, last_status_code, last_error, log, status, next_attempt_at, updated_at)
    WHERE d.id = v.id AND d.status = %s AND d.next_attempt_at = %s
    RETURNING d.id"""


def _record_tries(lease, tries: list[tuple[WebhookDelivery, webhooks.TryResult | None]]) -> list[WebhookDelivery]:
    """Record finished tries (None: the webhook is inactive, nothing was sent) in one UPDATE of the
    rows still under our `lease`; returns the deliveries recorded."""
    recorded_at = timezone.now()
    for delivery, result in tries:
        delivery.updated_at = recorded_at
        if result is None:
            delivery.status, delivery.next_attempt_at, delivery.last_error = WebhookDelivery.Status.FAILED, None, "webhook inactive"
            continue
        delivery.attempt_count += 1
        delivery.last_status_code = result.status_code
        delivery.last_error = result.error[:255]
        entry = {
            "at": recorded_at.isoformat(),
            "statusCode": result.status_code,
            "error": result.error[:255],
            "latencyMs": result.latency_ms,
        }
        delivery.log = [*delivery.log[-49:], entry]
        if result.ok:
            delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.SUCCEEDED, None
        elif delivery.attempt_count > _max_retries(delivery.webhook):
            delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.FAILED, None
            log.warning(
                "payment.webhook.failed", deliveryId=str(delivery.id), webhookId=str(delivery.webhook_id), tries=delivery.attempt_count
            )
        else:
            delivery.next_attempt_at = recorded_at + timedelta(seconds=_backoff(delivery.attempt_count))
    deliveries = [delivery for delivery, _result in tries]
    columns = [
        [d.id for d in deliveries],
        [d.attempt_count for d in deliveries],
        [d.last_status_code for d in deliveries],
        [d.last_error for d in deliveries],
        [json.dumps(d.log) for d in deliveries],
        [d.status for d in deliveries],
        [d.next_attempt_at for d in deliveries],
        [d.updated_at for d in deliveries],
    ]
    with connections[DB].cursor() as cursor:
        cursor.execute(RECORD_TRIES_SQL, [*columns, WebhookDelivery.Status.PENDING, lease])
        written = {row[0] for row in cursor.fetchall()}
    for delivery in deliveries:
        if delivery.id not in written:  # the try outlasted the lease and another worker took the delivery over
            log.warning("payment.webhook.lease_lost", deliveryId=str(delivery.id), webhookId=str(delivery.webhook_id))
    return [delivery for delivery in deliveries if delivery.id in written]


def webhook_deliveries_due(*, limit: int = 200) -> list[int]:
    """Ids of PENDING deliveries due now (the beat sweep sends them: retries, missed dispatches and
    deliveries whose worker died, once their lease ran out)."""
    return list(
        WebhookDelivery.objects.using(DB)
        .filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now())
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:limit]
    )


def webhook_redeliver(*, delivery_id: int, by_user: bool = False) -> WebhookDelivery:
    """Send a delivery again (manual replay): same webhook-id, so the receiver can dedupe."""
    with transaction.atomic(using=DB):
        delivery = WebhookDelivery.objects.using(DB).select_for_update().select_related("webhook").filter(pk=delivery_id).first()
        if delivery is None:
            raise NotFound("No delivery has this id.")
        refuse_platform_owned(delivery.webhook, by_user=by_user)
        if delivery.status == WebhookDelivery.Status.PENDING:
            raise Conflict("The delivery is still pending.", code="DELIVERY_PENDING")
        delivery.status = WebhookDelivery.Status.PENDING
        delivery.next_attempt_at = timezone.now()
        delivery.save(using=DB, update_fields=["status", "next_attempt_at", "updated_at"])
        _dispatch_on_commit([delivery.id])
    return delivery


def webhook_error_ratio(*, window_seconds: int = 300) -> tuple[int, int]:
    """(deliveries whose last try in the window failed, deliveries tried in the window): what the
    spec's webhook alert watches (errors above 10 percent)."""
    tried = WebhookDelivery.objects.using(DB).filter(
        updated_at__gte=timezone.now() - timedelta(seconds=window_seconds), attempt_count__gt=0
    )
    failed = tried.exclude(status=WebhookDelivery.Status.SUCCEEDED).count()
    return failed, tried.count()


def pending_queue_length() -> int:
    """What the spec's alert watches (pending above 1,000): attempts waiting for the provider and
    webhook deliveries waiting to be sent."""
    attempts = PaymentAttempt.objects.using(DB).filter(status__in=(A.CREATED, A.UNKNOWN)).count()
    deliveries = WebhookDelivery.objects.using(DB).filter(status=WebhookDelivery.Status.PENDING).count()
    return attempts + deliveries
