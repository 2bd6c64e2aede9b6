"""Every write of payment: transactions, attempts through providers, IPN confirmation, settlement,
cancellation, expiry and resolution of UNKNOWN attempts. Functions take ids, lock what they change
(the transaction row first, then its attempts) and emit their events inside the same database
transaction (apps/payment/events.py), so a state change and its events commit together.
"""

from __future__ import annotations

import json
import re
import secrets
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Q
from django.utils import timezone
from django_redis import get_redis_connection
from redis import RedisError

from apps.payment import events, ipn, webhooks
from apps.payment.connectors import CONNECTORS, DEVELOPMENT_INTEGRATION_ID, FAILED, PAID, PENDING, SENT, UNKNOWN, ProviderAnswer
from apps.payment.models import Channel, PaymentAttempt, PaymentTransaction, WebhookConfig, WebhookDelivery
from apps.payment.states import OPEN_ATTEMPT_STATES, next_attempt_status, next_transaction_status
from merchant_platform import crypto, outbound, references
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.integrations import MerchantIntegration, merchant_integration
from merchant_platform.logging import get_logger
from merchant_platform.money import AMOUNT_TOO_LARGE, MAX_AMOUNT

log = get_logger(__name__)

DB = "payment"
A = PaymentAttempt.Status
T = PaymentTransaction.Status
CURRENCY = re.compile(r"^[A-Z]{3}$")


def _transaction_conflict(txn: PaymentTransaction, action: str) -> Conflict:
    return Conflict(
        f"A {txn.status} transaction cannot {action}.",
        code="TRANSACTION_INVALID_TRANSITION",
        extra={"transactionStatus": txn.status, "action": action},
    )


def _attempt_conflict(attempt: PaymentAttempt, action: str) -> Conflict:
    return Conflict(
        f"A {attempt.status} attempt cannot {action}.",
        code="ATTEMPT_INVALID_TRANSITION",
        extra={"attemptStatus": attempt.status, "action": action},
    )


def _locked_transaction(transaction_id: int) -> PaymentTransaction:
    try:
        return PaymentTransaction.objects.using(DB).select_for_update().get(pk=transaction_id)
    except PaymentTransaction.DoesNotExist:
        raise NotFound("No payment transaction has this id.") from None


def _move_attempt(attempt: PaymentAttempt, action: str, **fields) -> None:
    target = next_attempt_status(action, attempt.status)
    if target is None:
        raise _attempt_conflict(attempt, action)
    attempt.status = target
    for name, value in fields.items():
        setattr(attempt, name, value)
    attempt.save(using=DB, update_fields=["status", *fields, "updated_at"])


def new_attempt_code() -> str:
    """prov_TxnRef: 128 random bits, URL- and form-safe."""
    return "PA" + secrets.token_hex(16).upper()


def _check_amount(amount: int) -> None:
    if amount > MAX_AMOUNT:
        raise ApiError(
            f"amount is over the largest amount the platform takes ({MAX_AMOUNT} minor units).",
            code=AMOUNT_TOO_LARGE,
            status_code=400,
            extra={"field": "amount", "maxAmount": MAX_AMOUNT},
        )


def _check(amount: int, currency: str) -> None:
    if amount <= 0:
        raise InvalidInput({"amount": "Must be a positive number of minor units."})
    _check_amount(amount)
    if not CURRENCY.match(currency):
        raise InvalidInput({"currency": "Must be an ISO 4217 code (three capital letters)."})


def _expiry(channel: str):
    return timezone.now() + timedelta(seconds=settings.PAYMENT_QR_EXPIRY_SECONDS) if channel == Channel.QR else None


def _add_attempt(txn: PaymentTransaction, *, channel: str, amount: int) -> PaymentAttempt:
    attempt = PaymentAttempt(
        transaction=txn, merchant_id=txn.merchant_id, channel=channel, code=new_attempt_code(), amount=amount, expires_at=_expiry(channel)
    )
    attempt.save(using=DB, force_insert=True)
    return attempt


@dataclass(frozen=True)
class Created:
    transaction: PaymentTransaction
    attempt: PaymentAttempt | None
    created: bool


def transaction_create(
    *,
    merchant_id: int,
    source_id: str,
    amount: int,
    currency: str,
    channel: str = Channel.QR,
    tax_amount: int | None = None,
    finance_account_id: int | None = None,
    lines: list | None = None,
    description: str = "",
    created_by: int | None = None,
    source_type: str = PaymentTransaction.SourceType.ORDER,
) -> Created:
    """Open a transaction and its first attempt (events transaction.created, attempt.created).
    The same `source_id` for the merchant (and source type) returns the live transaction already
    made (spec 7: the sale retries); with another amount or currency it is a 409 SOURCE_ID_CONFLICT.
    `source_type` ORDER (a sale order, which consumers match on its sourceId) is for the sale side's
    service credentials; a user's transaction is MANUAL (the views decide) and carries no lines.
    `tax_amount` is the tax included in `amount` (0 to `amount`), published for finance's SALE voucher."""
    _check(amount, currency)
    if tax_amount is not None and not 0 <= tax_amount <= amount:
        raise InvalidInput({"taxAmount": f"Must be between 0 and the amount ({amount} minor units)."})
    if source_type == PaymentTransaction.SourceType.MANUAL and lines:
        raise InvalidInput({"lines": "Only the sale side (service credentials) sends an order's lines."})
    if source_type == PaymentTransaction.SourceType.MANUAL and finance_account_id is not None:
        # A user's value: the account must be the merchant's (an ORDER's is checked by commerce,
        # where the user gave it). Finance answers, since payment cannot read its records.
        references.check_owned(
            field="financeAccountId",
            url=f"{settings.PAYMENT_FINANCE_URL}/accounts/{finance_account_id}",
            merchant_id=merchant_id,
            what="finance account",
        )
    same_source = PaymentTransaction.objects.using(DB).filter(merchant_id=merchant_id, source_type=source_type, source_id=source_id)
    existing = same_source.first()
    if existing is None:
        try:
            with transaction.atomic(using=DB):
                txn = PaymentTransaction(
                    merchant_id=merchant_id,
                    source_type=source_type,
                    source_id=source_id,
                    amount=amount,
                    tax_amount=tax_amount,
                    currency=currency,
                    finance_account_id=finance_account_id,
                    lines=lines or [],
                    description=description,
                    created_by=created_by,
                )
                txn.save(using=DB, force_insert=True)
                attempt = _add_attempt(txn, channel=channel, amount=amount)
                events.emit(events.TRANSACTION_CREATED, txn=txn, attempt=attempt)
                events.emit(events.ATTEMPT_CREATED, txn=txn, attempt=attempt)
            return Created(txn, attempt, True)
        except IntegrityError:
            existing = same_source.first()
            if existing is None:
                raise
    if existing.amount != amount or existing.currency != currency or existing.tax_amount != tax_amount:
        raise Conflict(
            "A transaction with this sourceId exists with another amount, tax or currency.",
            code="SOURCE_ID_CONFLICT",
            extra={"transactionId": str(existing.id)},
        )
    return Created(existing, None, False)


def attempt_create(*, transaction_id: int, channel: str, amount: int | None = None) -> PaymentAttempt:
    """A new attempt on a NEW transaction with no open attempt, for at most what is left to pay."""
    with transaction.atomic(using=DB):
        txn = _locked_transaction(transaction_id)
        if next_transaction_status("settle", txn.status) is None:
            raise _transaction_conflict(txn, "take an attempt")
        if txn.attempts.using(DB).filter(status__in=OPEN_ATTEMPT_STATES).exists():
            raise Conflict("The transaction has an open attempt: cancel it or wait for it.", code="ATTEMPT_OPEN")
        remaining = txn.amount - txn.paid_amount
        amount = remaining if amount is None else amount
        _check_amount(amount)
        if amount <= 0 or amount > remaining:
            raise InvalidInput({"amount": f"Must be between 1 and the {remaining} left to pay."})
        attempt = _add_attempt(txn, channel=channel, amount=amount)
        events.emit(events.ATTEMPT_CREATED, txn=txn, attempt=attempt)
    return attempt


def _integration(*, merchant_id: int, channel: str) -> MerchantIntegration:
    """The merchant's integration for `channel` (NotFound, DecryptionFailed as the kernel raises them).
    In development (PAYMENT_DEVELOPMENT_PROVIDER) a merchant without one has the development
    integration: the fake provider scripts/run starts, with its development secret."""
    try:
        return merchant_integration(merchant_id=merchant_id, code=channel, environment=settings.PAYMENT_PROVIDER_ENVIRONMENT)
    except NotFound:
        if not settings.PAYMENT_DEVELOPMENT_PROVIDER:
            raise
    return MerchantIntegration(
        id=DEVELOPMENT_INTEGRATION_ID,
        merchant_id=merchant_id,
        code=channel,
        environment=settings.PAYMENT_PROVIDER_ENVIRONMENT,
        settings={"endpoint": f"http://127.0.0.1:{settings.PAYMENT_FAKE_PROVIDER_PORT}"},
        credential=settings.PAYMENT_FAKE_PROVIDER_SECRET,
    )


def _provider(attempt: PaymentAttempt):
    """The attempt's connector and its merchant's integration, or a reason the call cannot be made."""
    connector = CONNECTORS[attempt.channel]
    try:
        integration = _integration(merchant_id=attempt.merchant_id, channel=attempt.channel)
    except NotFound:
        return connector, None, "integration not found"
    except crypto.DecryptionFailed:
        return connector, None, "decrypt failed"
    return connector, integration, ""


def attempt_send(*, attempt_id: int) -> PaymentAttempt:
    """Send a CREATED attempt to its provider (outside any database transaction), then record the
    answer: SENT (attempt.sent), FAILED (attempt.failed) or UNKNOWN on a timeout, which the resolver
    settles by asking the provider."""
    attempt = PaymentAttempt.objects.using(DB).get(pk=attempt_id)
    if attempt.status != A.CREATED:
        return attempt
    connector, integration, reason = _provider(attempt)
    if integration is None:
        log.error("payment.attempt.provider_unavailable", attemptId=str(attempt.id), reason=reason)
        answer = ProviderAnswer(FAILED, reason=reason)
    else:
        answer = connector.create_payment(
            integration=integration,
            code=attempt.code,
            amount=attempt.amount,
            currency=attempt.transaction.currency,
            expires_at=attempt.expires_at,
        )
    return _record_answer(attempt_id=attempt.id, answer=answer)


def _record_answer(*, attempt_id: int, answer: ProviderAnswer) -> PaymentAttempt:
    with transaction.atomic(using=DB):
        attempt = PaymentAttempt.objects.using(DB).get(pk=attempt_id)
        txn = _locked_transaction(attempt.transaction_id)
        attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt_id)
        if attempt.status not in (A.CREATED, A.UNKNOWN):
            return attempt  # an IPN or a cancellation got there first
        if answer.status == SENT or (answer.status == PENDING and attempt.status == A.UNKNOWN):
            _move_attempt(
                attempt,
                "send",
                sent_at=timezone.now(),
                provider_reference=answer.reference or attempt.provider_reference,
                qr_payload=answer.qr_payload or attempt.qr_payload,
            )
            events.emit(events.ATTEMPT_SENT, txn=txn, attempt=attempt)
        elif answer.status == FAILED:
            _move_attempt(attempt, "fail", failure_reason=answer.reason[:255])
            events.emit(events.ATTEMPT_FAILED, txn=txn, attempt=attempt)
        elif answer.status == PAID:
            _succeed(txn, attempt, reference=answer.reference, bank_code=answer.bank_code, paid_at=_pay_date(answer.pay_date))
        elif answer.status == UNKNOWN and attempt.status == A.CREATED:
            _move_attempt(attempt, "time_out", failure_reason=answer.reason[:255])
            log.warning("payment.attempt.unknown", attemptId=str(attempt.id), reason=answer.reason)
    return attempt


def _succeed(txn: PaymentTransaction, attempt: PaymentAttempt, *, reference: str, bank_code: str, paid_at) -> None:
    """302_SUCCESS, then the transaction's paid amount and, when covered, SETTLED; attempt.success
    carries the transaction as it now is, and transaction.settled follows when it settled."""
    _move_attempt(attempt, "succeed", provider_reference=reference[:128], bank_code=bank_code[:32], paid_at=paid_at or timezone.now())
    txn.paid_amount += attempt.amount
    fields = ["paid_amount"]
    settles = txn.paid_amount >= txn.amount and next_transaction_status("settle", txn.status) is not None
    if settles:
        txn.status = T.SETTLED
        txn.settled_at = timezone.now()
        fields += ["status", "settled_at"]
    txn.save(using=DB, update_fields=[*fields, "updated_at"])
    events.emit_many([events.ATTEMPT_SUCCESS, *([events.TRANSACTION_SETTLED] if settles else [])], txn=txn, attempt=attempt)


def _pay_date(value: str):
    """prov_PayDate (YYYYMMDDHHMMSS, read as UTC) or None when it is empty or malformed."""
    try:
        return datetime.strptime(value, "%Y%m%d%H%M%S").replace(tzinfo=UTC) if value else None
    except ValueError:
        return None


def transaction_cancel(*, transaction_id: int) -> PaymentTransaction:
    """Cancel a NEW transaction: each open attempt is cancelled (attempt.cancelled), then the
    transaction (transaction.cancelled). Refused (409 ATTEMPT_UNRESOLVED) while an attempt is
    UNKNOWN: the provider may have taken the money."""
    with transaction.atomic(using=DB):
        txn = _locked_transaction(transaction_id)
        if next_transaction_status("cancel", txn.status) is None:
            raise _transaction_conflict(txn, "cancel")
        attempts = list(txn.attempts.using(DB).select_for_update().filter(status__in=OPEN_ATTEMPT_STATES).order_by("id"))
        if any(attempt.status == A.UNKNOWN for attempt in attempts):
            raise Conflict("An attempt is waiting for the provider's answer; cancel once it is resolved.", code="ATTEMPT_UNRESOLVED")
        for attempt in attempts:
            _move_attempt(attempt, "cancel")
            events.emit(events.ATTEMPT_CANCELLED, txn=txn, attempt=attempt)
        txn.status = T.CANCELLED
        txn.cancelled_at = timezone.now()
        txn.save(using=DB, update_fields=["status", "cancelled_at", "updated_at"])
        events.emit(events.TRANSACTION_CANCELLED, txn=txn)
    return txn


def attempt_cancel(*, attempt_id: int) -> PaymentAttempt:
    """Cancel one open attempt (attempt.cancelled); the transaction stays NEW for another attempt."""
    with transaction.atomic(using=DB):
        attempt = PaymentAttempt.objects.using(DB).filter(pk=attempt_id).first()
        if attempt is None:
            raise NotFound("No payment attempt has this id.")
        txn = _locked_transaction(attempt.transaction_id)
        attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt_id)
        _move_attempt(attempt, "cancel")
        events.emit(events.ATTEMPT_CANCELLED, txn=txn, attempt=attempt)
    return attempt


# IPN replies (VNPay's codes): docs/services/payment.md.
CONFIRMED, NOT_FOUND, ALREADY_CONFIRMED, WRONG_AMOUNT, BAD_SIGNATURE, OTHER = "00", "01", "02", "04", "97", "99"
REPLY_MESSAGES = {
    CONFIRMED: "Confirm Success",
    NOT_FOUND: "Order not found",
    ALREADY_CONFIRMED: "Order already confirmed",
    WRONG_AMOUNT: "Invalid amount",
    BAD_SIGNATURE: "Invalid signature",
    OTHER: "Unknown error",
}
REQUIRED_IPN_FIELDS = ("prov_TxnRef", "prov_Amount", "prov_ResponseCode", "prov_SecureHash")
PAY_DATE = re.compile(r"^\d{14}$")


def ipn_confirm(*, channel: str, fields: dict) -> str:
    """Handle one provider IPN for `channel`; returns the reply code. Never raises for bad input."""
    if not isinstance(fields, dict) or any(
        not isinstance(fields.get(name), str | int) or isinstance(fields.get(name), bool) for name in REQUIRED_IPN_FIELDS
    ):
        log.warning("payment.ipn.malformed", channel=channel)
        return OTHER
    if any(not isinstance(value, str | int) or isinstance(value, bool) for value in fields.values()):
        log.warning("payment.ipn.malformed", channel=channel)
        return OTHER
    code = str(fields["prov_TxnRef"])
    try:
        attempt = PaymentAttempt.objects.using(DB).get(code=code, channel=channel)
    except PaymentAttempt.DoesNotExist:
        log.warning("payment.ipn.unknown_attempt", channel=channel)
        return NOT_FOUND
    try:
        integration = _integration(merchant_id=attempt.merchant_id, channel=channel)
    except (NotFound, crypto.DecryptionFailed) as exc:
        log.error("payment.ipn.no_secret", attemptId=str(attempt.id), reason=getattr(exc, "code", "DECRYPT_FAILED"))
        return OTHER
    if not ipn.verify(fields, integration.credential):
        log.warning("payment.ipn.bad_signature", attemptId=str(attempt.id), channel=channel)
        return BAD_SIGNATURE
    amount = str(fields["prov_Amount"])
    if not amount.isdigit() or int(amount) != attempt.amount * 100:
        log.warning("payment.ipn.wrong_amount", attemptId=str(attempt.id))
        return WRONG_AMOUNT
    pay_date = str(fields.get("prov_PayDate") or "")
    if pay_date and (not PAY_DATE.match(pay_date) or _pay_date(pay_date) is None):
        log.warning("payment.ipn.bad_pay_date", attemptId=str(attempt.id))
        return OTHER
    success = str(fields["prov_ResponseCode"]) == "00"
    with transaction.atomic(using=DB):
        txn = _locked_transaction(attempt.transaction_id)
        attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt.id)
        if attempt.status == A.SUCCESS:
            return CONFIRMED if success else ALREADY_CONFIRMED  # the provider's retry: nothing changes
        if attempt.status not in OPEN_ATTEMPT_STATES:
            if success:
                log.error("payment.ipn.late_success", attemptId=str(attempt.id), attemptStatus=attempt.status)
            return ALREADY_CONFIRMED
        reference = str(fields.get("prov_TransactionNo") or "")
        bank_code = str(fields.get("prov_BankCode") or "")
        if success:
            _succeed(txn, attempt, reference=reference, bank_code=bank_code, paid_at=_pay_date(pay_date))
        else:
            _move_attempt(
                attempt,
                "fail",
                provider_reference=reference[:128],
                bank_code=bank_code[:32],
                failure_reason=f"provider response {str(fields['prov_ResponseCode'])[:32]}",
            )
            events.emit(events.ATTEMPT_FAILED, txn=txn, attempt=attempt)
    return CONFIRMED


def attempts_expire(*, now=None, limit: int = 500) -> int:
    """SENT attempts past their expiry become EXPIRED (attempt.expired); returns how many."""
    now = now or timezone.now()
    due = list(
        PaymentAttempt.objects.using(DB)
        .filter(status=A.SENT, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("id", "transaction_id")[:limit]
    )
    expired = 0
    for attempt_id, transaction_id in due:
        with transaction.atomic(using=DB):
            txn = _locked_transaction(transaction_id)
            attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt_id)
            if attempt.status != A.SENT or attempt.expires_at is None or attempt.expires_at > now:
                continue
            _move_attempt(attempt, "expire")
            events.emit(events.ATTEMPT_EXPIRED, txn=txn, attempt=attempt)
            expired += 1
    return expired


def attempt_resolve(*, attempt_id: int) -> PaymentAttempt:
    """Ask the provider where an UNKNOWN attempt stands (Kill Bill's janitor) and record what it says;
    an unreachable provider leaves it UNKNOWN for the next round, never guessed."""
    attempt = PaymentAttempt.objects.using(DB).get(pk=attempt_id)
    if attempt.status != A.UNKNOWN:
        return attempt
    connector, integration, reason = _provider(attempt)
    if integration is None:
        log.error("payment.attempt.resolve_failed", attemptId=str(attempt.id), reason=reason)
        return attempt
    answer = connector.query_payment(integration=integration, code=attempt.code)
    if answer.status == UNKNOWN:
        log.warning("payment.attempt.still_unknown", attemptId=str(attempt.id), reason=answer.reason)
        return attempt
    return _record_answer(attempt_id=attempt.id, answer=answer)


STALE_CREATED_SECONDS = 120  # longer than any provider call: a CREATED attempt this old was never sent


def attempts_resolve_unknown(*, limit: int = 100) -> int:
    """Ask the provider about UNKNOWN attempts, and send the CREATED attempts whose process died
    before sending them (so a retried creation, answered from its sourceId, is not left unsent)."""
    ids = list(PaymentAttempt.objects.using(DB).filter(status=A.UNKNOWN).order_by("updated_at").values_list("id", flat=True)[:limit])
    for attempt_id in ids:
        attempt_resolve(attempt_id=attempt_id)
    stale = timezone.now() - timedelta(seconds=STALE_CREATED_SECONDS)
    unsent = list(
        PaymentAttempt.objects.using(DB)
        .filter(status=A.CREATED, created_at__lt=stale)
        .order_by("created_at")
        .values_list("id", flat=True)[:limit]
    )
    for attempt_id in unsent:
        attempt_send(attempt_id=attempt_id)
    return len(ids) + len(unsent)


# Webhooks (spec 2.1 WebhookConfig, 5, 6.1): configs, deliveries as rows written with the event,
# sent by Celery (apps/payment/tasks.py), retried with exponential backoff and jitter.

DELIVER_TASK = "apps.payment.tasks.deliver_webhooks"
MAX_RETRIES_LIMIT = 20


def _max_retries(config: WebhookConfig) -> int:
    value = (config.metadata or {}).get("maxRetries")
    return settings.PAYMENT_WEBHOOK_DEFAULT_MAX_RETRIES if value is None else int(value)


def _check_webhook(changes: dict, *, internal: bool = False) -> None:
    if "url" in changes:
        try:
            webhooks.check_url(changes["url"], internal=internal)
        except outbound.RefusedUrl as exc:
            raise InvalidInput({"url": str(exc)}) from None
    if "event_types" in changes:
        unknown = sorted(set(changes["event_types"]) - set(events.EVENT_TYPES) - {"*"})
        if unknown or not changes["event_types"]:
            raise InvalidInput({"eventTypes": f"Name one or more of {', '.join(events.EVENT_TYPES)} (or *)."})
    retries = (changes.get("metadata") or {}).get("maxRetries")
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES_LIMIT):
        raise InvalidInput({"metadata": f"maxRetries must be an integer from 0 to {MAX_RETRIES_LIMIT}."})


def _seal_secret(config_id: int, secret: str) -> str:
    return crypto.encrypt(secret, purpose=WebhookConfig.SECRET_PURPOSE, associated_data=str(config_id).encode())


def webhook_create(
    *,
    merchant_id: int,
    name: str,
    url: str,
    event_types: list[str],
    status: str = WebhookConfig.Status.ACTIVE,
    metadata: dict | None = None,
    created_by: int | None = None,
    internal: bool = False,
) -> tuple[WebhookConfig, str]:
    """A webhook config and its signing secret (`whsec_...`): returned here once, stored sealed.
    `internal`: made by a platform service, so its URL must be one of the platform's own receivers
    (private addresses allowed: WebhookConfig.internal)."""
    metadata = dict(metadata or {})
    _check_webhook({"url": url, "event_types": event_types, "metadata": metadata}, internal=internal)
    metadata.setdefault("maxRetries", settings.PAYMENT_WEBHOOK_DEFAULT_MAX_RETRIES)
    secret = webhooks.new_secret()
    with transaction.atomic(using=DB):
        config = WebhookConfig(
            merchant_id=merchant_id,
            name=name,
            url=url,
            event_types=event_types,
            status=status,
            metadata=metadata,
            created_by=created_by,
            internal=internal,
        )
        config.secret = ""
        config.save(using=DB, force_insert=True)
        config.secret = _seal_secret(config.id, secret)
        config.save(using=DB, update_fields=["secret"])
    return config, secret


def _refuse_platform_owned(config: WebhookConfig, *, by_user: bool) -> None:
    """A platform service's subscription (`internal`) is not a user's to change, delete or replay
    (the API hides it from users; this holds for any other caller too)."""
    if by_user and config.internal:
        raise ApiError(
            "This webhook belongs to the platform; it cannot be changed by a user.", code="WEBHOOK_PLATFORM_OWNED", status_code=403
        )


def webhook_update(*, webhook_id: int, by_user: bool = False, **changes) -> WebhookConfig:
    """Change a config (`by_user`: a user's request, refused for a platform service's config)."""
    with transaction.atomic(using=DB):
        config = WebhookConfig.objects.using(DB).select_for_update().filter(pk=webhook_id).first()
        if config is None:
            raise NotFound("No webhook has this id.")
        _refuse_platform_owned(config, by_user=by_user)
        _check_webhook(changes, internal=config.internal)
        if "metadata" in changes:
            changes["metadata"] = {**config.metadata, **changes["metadata"]}
        for name, value in changes.items():
            setattr(config, name, value)
        config.save(using=DB, update_fields=[*changes, "updated_at"])
    return config


def webhook_delete(*, webhook_id: int, by_user: bool = False) -> None:
    """Soft-delete the config; its pending deliveries are not sent any more."""
    with transaction.atomic(using=DB):
        config = WebhookConfig.objects.using(DB).select_for_update().filter(pk=webhook_id).first()
        if config is None:
            raise NotFound("No webhook has this id.")
        _refuse_platform_owned(config, by_user=by_user)
        config.delete(using=DB)
        WebhookDelivery.objects.using(DB).filter(webhook_id=webhook_id, status=WebhookDelivery.Status.PENDING).update(
            status=WebhookDelivery.Status.FAILED, last_error="webhook deleted", next_attempt_at=None, updated_at=timezone.now()
        )


# Set while a delivery task is queued and has not started (a lost task holds others back no longer
# than its expiry; the beat sweep sends what is due meanwhile).
TASK_QUEUED_KEY = "mp:payment:webhook-task-queued"
TASK_QUEUED_SECONDS = 5


def webhook_dispatch(delivery_ids: list[int]) -> None:
    """Queue a delivery task for these deliveries, unless one is queued and has not started: that
    one takes them (a task fills its batch with every due delivery), so under load many state
    changes share one task instead of paying a task each. With Redis unreachable, queue anyway."""
    try:
        if not get_redis_connection("default").set(TASK_QUEUED_KEY, 1, nx=True, ex=TASK_QUEUED_SECONDS):
            return
    except RedisError as exc:
        log.warning("payment.webhook.dispatch_flag_unavailable", error=type(exc).__name__)
    current_app.send_task(DELIVER_TASK, args=delivery_ids)


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


class WebhookHandler:
    """Payment events to the merchant's active webhooks subscribed to them: one delivery row each,
    written with the event, sent once the state change commits."""

    def get_name(self) -> str:
        return "webhooks"

    def is_ready(self) -> bool:
        return True

    def handle(self, payload: dict) -> None:
        self.handle_many([payload])

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
        _refuse_platform_owned(delivery.webhook, by_user=by_user)
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
