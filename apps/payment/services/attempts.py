"""Attempts at their providers: sending (attempt.sent, attempt.failed, UNKNOWN on a timeout),
success and settlement, QR expiry, and resolution of UNKNOWN attempts by asking the provider."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.payment import events
from apps.payment.connectors import CONNECTORS, DEVELOPMENT_INTEGRATION_ID, FAILED, PAID, PENDING, SENT, UNKNOWN, ProviderAnswer
from apps.payment.models import PaymentAttempt, PaymentTransaction, Refund
from apps.payment.services.records import DB, A, T, locked_transaction, move_attempt
from apps.payment.states import next_transaction_status
from merchant_platform import crypto
from merchant_platform.errors import NotFound
from merchant_platform.integrations import MerchantIntegration, merchant_integration
from merchant_platform.logging import get_logger

log = get_logger(__name__)


def provider_integration(*, merchant_id: int, channel: str) -> MerchantIntegration:
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


def provider_of(record: PaymentAttempt | Refund):
    """The connector of an attempt's or a refund's channel and its merchant's integration, or a
    reason the call cannot be made."""
    connector = CONNECTORS[record.channel]
    try:
        integration = provider_integration(merchant_id=record.merchant_id, channel=record.channel)
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
    connector, integration, reason = provider_of(attempt)
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
        txn = locked_transaction(attempt.transaction_id)
        attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt_id)
        if attempt.status not in (A.CREATED, A.UNKNOWN):
            return attempt  # an IPN or a cancellation got there first
        if answer.status == SENT or (answer.status == PENDING and attempt.status == A.UNKNOWN):
            move_attempt(
                attempt,
                "send",
                sent_at=timezone.now(),
                provider_reference=answer.reference or attempt.provider_reference,
                qr_payload=answer.qr_payload or attempt.qr_payload,
            )
            events.emit(events.ATTEMPT_SENT, txn=txn, attempt=attempt)
        elif answer.status == FAILED:
            move_attempt(attempt, "fail", failure_reason=answer.reason[:255])
            events.emit(events.ATTEMPT_FAILED, txn=txn, attempt=attempt)
        elif answer.status == PAID:
            succeed(txn, attempt, reference=answer.reference, bank_code=answer.bank_code, paid_at=parse_pay_date(answer.pay_date))
        elif answer.status == UNKNOWN and attempt.status == A.CREATED:
            move_attempt(attempt, "time_out", failure_reason=answer.reason[:255])
            log.warning("payment.attempt.unknown", attemptId=str(attempt.id), reason=answer.reason)
    return attempt


def succeed(txn: PaymentTransaction, attempt: PaymentAttempt, *, reference: str, bank_code: str, paid_at) -> None:
    """302_SUCCESS, then the transaction's paid amount and, when covered, SETTLED; attempt.success
    carries the transaction as it now is, and transaction.settled follows when it settled."""
    move_attempt(attempt, "succeed", provider_reference=reference[:128], bank_code=bank_code[:32], paid_at=paid_at or timezone.now())
    txn.paid_amount += attempt.amount
    fields = ["paid_amount"]
    settles = txn.paid_amount >= txn.amount and next_transaction_status("settle", txn.status) is not None
    if settles:
        txn.status = T.SETTLED
        txn.settled_at = timezone.now()
        fields += ["status", "settled_at"]
    txn.save(using=DB, update_fields=[*fields, "updated_at"])
    events.emit_many([events.ATTEMPT_SUCCESS, *([events.TRANSACTION_SETTLED] if settles else [])], txn=txn, attempt=attempt)


def parse_pay_date(value: str):
    """prov_PayDate (YYYYMMDDHHMMSS, read as UTC) or None when it is empty or malformed."""
    try:
        return datetime.strptime(value, "%Y%m%d%H%M%S").replace(tzinfo=UTC) if value else None
    except ValueError:
        return None


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
            txn = locked_transaction(transaction_id)
            attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt_id)
            if attempt.status != A.SENT or attempt.expires_at is None or attempt.expires_at > now:
                continue
            move_attempt(attempt, "expire")
            events.emit(events.ATTEMPT_EXPIRED, txn=txn, attempt=attempt)
            expired += 1
    return expired


def attempt_resolve(*, attempt_id: int) -> PaymentAttempt:
    """Ask the provider where an UNKNOWN attempt stands (Kill Bill's janitor) and record what it says;
    an unreachable provider leaves it UNKNOWN for the next round, never guessed."""
    attempt = PaymentAttempt.objects.using(DB).get(pk=attempt_id)
    if attempt.status != A.UNKNOWN:
        return attempt
    connector, integration, reason = provider_of(attempt)
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
