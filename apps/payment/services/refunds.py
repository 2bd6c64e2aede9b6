"""Refunds (issue 33): money given back on a SETTLED or PARTIALLY_REFUNDED transaction through the
provider of the attempt that collected it; the provider's answer (at once, by signed callback, or
asked by the resolver), and the cashier's confirmation of a SYSTEM (cash) refund.

The rule that matters: the refunds of a transaction that are not FAILED never add up to more than it
was paid. It is checked under the transaction's row lock, and the database holds it too: the
transaction's `refund_reserved_amount` (their sum) has a CHECK against `paid_amount`, updated in the
same database transaction as the refund row.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from datetime import timedelta
from fractions import Fraction

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from apps.payment import events, ipn
from apps.payment.connectors import FAILED, PENDING, REFUND_NOT_FOUND, SUCCEEDED, UNKNOWN, ProviderAnswer
from apps.payment.models import Channel, PaymentAttempt, PaymentTransaction, Refund
from apps.payment.services.attempts import provider_integration, provider_of
from apps.payment.services.ipn_confirmation import ALREADY_CONFIRMED, BAD_SIGNATURE, CONFIRMED, NOT_FOUND, OTHER, WRONG_AMOUNT
from apps.payment.services.records import DB, A, T, check_amount, locked_transaction, transition_conflict
from apps.payment.states import REFUNDABLE_TRANSACTION_STATES, next_refund_status, next_transaction_status
from merchant_platform import crypto
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger

log = get_logger(__name__)

R = Refund.Status
# Longer than any provider call: a PENDING refund this old is asked about (querydr), never guessed.
RESOLVE_AFTER_SECONDS = 120


def new_refund_code() -> str:
    """The refund's reference at the provider: 128 random bits."""
    return "RF" + secrets.token_hex(16).upper()


def refund_conflict(refund: Refund, action: str) -> Conflict:
    return transition_conflict("refund", refund.status, action)


def _not_refundable(txn: PaymentTransaction, why: str) -> Conflict:
    return Conflict(why, code="TRANSACTION_NOT_REFUNDABLE", extra={"transactionStatus": txn.status, "sourceType": txn.source_type})


def _exceeds(txn: PaymentTransaction, refundable: int) -> Conflict:
    return Conflict(
        f"The refund is more than what is left to refund ({refundable} minor units).",
        code="REFUND_EXCEEDS_REFUNDABLE",
        extra={"refundableAmount": refundable, "paidAmount": txn.paid_amount, "refundReservedAmount": txn.refund_reserved_amount},
    )


def _line_error(code: str, message: str, field: str, **extra) -> ApiError:
    return ApiError(message, code=code, status_code=400, extra={"field": field, **extra})


def _check_lines(txn: PaymentTransaction, lines: list[dict], live_refunds) -> list[dict]:
    """The refund's lines, each a line of the transaction (lineId and variantId), their cumulative
    refunded quantity (every refund not FAILED, this one included) within the line's quantity."""
    if not lines:
        return []
    if txn.source_type != PaymentTransaction.SourceType.ORDER:
        raise InvalidInput({"lines": "Only a sale order's transaction (ORDER) has lines to refund."})
    sold = {str(line.get("lineId")): line for line in txn.lines}
    refunded: dict[str, int] = defaultdict(int)
    for earlier in live_refunds.values_list("lines", flat=True):
        for line in earlier:
            refunded[line["lineId"]] += line["quantity"]
    checked = []
    for index, line in enumerate(lines):
        sale_line = sold.get(line["lineId"])
        if sale_line is None:
            raise _line_error("REFUND_LINE_UNKNOWN", f"The transaction has no line {line['lineId']!r}.", f"lines.{index}.lineId")
        if str(sale_line.get("variantId")) != line["variantId"]:
            raise _line_error(
                "REFUND_LINE_UNKNOWN", f"Line {line['lineId']!r} of the transaction is not of this variant.", f"lines.{index}.variantId"
            )
        refunded[line["lineId"]] += line["quantity"]
        if refunded[line["lineId"]] > int(sale_line["quantity"]):
            left = int(sale_line["quantity"]) - (refunded[line["lineId"]] - line["quantity"])
            raise _line_error(
                "REFUND_LINE_QUANTITY_EXCEEDED",
                f"Line {line['lineId']!r} has {max(left, 0)} left to refund.",
                f"lines.{index}.quantity",
                refundableQuantity=max(left, 0),
            )
        checked.append(
            {
                "lineId": line["lineId"],
                "variantId": line["variantId"],
                "quantity": line["quantity"],
                "restock": line["restock"],
                "locationId": line.get("locationId"),
            }
        )
    return checked


def _tax_share(txn: PaymentTransaction, *, amount: int, reserved_tax: int, tax_amount: int | None) -> int:
    """The tax this refund gives back: the caller's (at most what is left of the transaction's tax),
    else the transaction's tax prorated cumulatively (round half even), so that refunding everything
    refunds exactly the tax."""
    total_tax = txn.tax_amount or 0
    if tax_amount is not None:
        if tax_amount > amount:
            raise InvalidInput({"taxAmount": f"Must be between 0 and the amount ({amount} minor units)."})
        if txn.tax_amount is not None and reserved_tax + tax_amount > total_tax:
            raise InvalidInput({"taxAmount": f"Must be at most the tax left to refund ({total_tax - reserved_tax} minor units)."})
        return tax_amount
    reserved = txn.refund_reserved_amount
    if reserved + amount >= txn.paid_amount:
        share = total_tax - reserved_tax
    else:
        share = round(Fraction(total_tax * (reserved + amount), txn.paid_amount)) - reserved_tax
    return max(0, min(share, amount, total_tax - reserved_tax))


def _refunding_attempt(txn: PaymentTransaction, amount: int) -> PaymentAttempt:
    """The successful attempt the refund goes back through: the first with room for all of it (a
    provider refunds one payment; a transaction paid in parts is refunded part by part)."""
    reserved_of = dict(
        Refund.objects.using(DB)
        .filter(transaction=txn)
        .exclude(status=R.FAILED)
        .values("attempt_id")
        .annotate(total=Sum("amount"))
        .values_list("attempt_id", "total")
    )
    paid = list(txn.attempts.using(DB).filter(status=A.SUCCESS).order_by("id"))
    for attempt in paid:
        if attempt.amount - reserved_of.get(attempt.id, 0) >= amount:
            return attempt
    largest = max((attempt.amount - reserved_of.get(attempt.id, 0) for attempt in paid), default=0)
    raise Conflict(
        f"The transaction was paid in parts; one refund goes back through one payment, at most {largest} minor units here.",
        code="REFUND_EXCEEDS_REFUNDABLE",
        extra={"refundableAmount": txn.paid_amount - txn.refund_reserved_amount, "largestRefundAmount": largest},
    )


def refund_create(
    *,
    transaction_id: int,
    amount: int,
    currency: str,
    reason: str,
    tax_amount: int | None = None,
    lines: list[dict] | None = None,
    requested_by: int | None = None,
    by_service: bool,
) -> Refund:
    """A PENDING refund of a SETTLED or PARTIALLY_REFUNDED transaction (event refund.created); the
    provider is asked once it committed (`refund_send`). An ORDER transaction is refunded by the sale
    side (`by_service`: commerce's return), a MANUAL one by the merchant's user."""
    check_amount(amount)
    with transaction.atomic(using=DB):
        txn = locked_transaction(transaction_id)
        if txn.status not in REFUNDABLE_TRANSACTION_STATES:
            raise _not_refundable(txn, f"A {txn.status} transaction cannot be refunded.")
        is_order = txn.source_type == PaymentTransaction.SourceType.ORDER
        if is_order != by_service:
            raise _not_refundable(
                txn,
                "A sale order's payment is refunded through the sale order (commerce)."
                if is_order
                else "A merchant's own payment (MANUAL) is refunded by the merchant's users.",
            )
        if currency != txn.currency:
            raise ApiError(
                f"The refund's currency must be the transaction's ({txn.currency}).",
                code="REFUND_CURRENCY_MISMATCH",
                status_code=400,
                extra={"field": "currency", "transactionCurrency": txn.currency},
            )
        live_refunds = Refund.objects.using(DB).filter(transaction=txn).exclude(status=R.FAILED)
        checked_lines = _check_lines(txn, lines or [], live_refunds)
        refundable = txn.paid_amount - txn.refund_reserved_amount
        if amount > refundable:
            raise _exceeds(txn, refundable)
        attempt = _refunding_attempt(txn, amount)
        reserved_tax = live_refunds.aggregate(total=Sum("tax_amount"))["total"] or 0
        tax = _tax_share(txn, amount=amount, reserved_tax=reserved_tax, tax_amount=tax_amount)
        refund = Refund(
            transaction=txn,
            attempt=attempt,
            merchant_id=txn.merchant_id,
            channel=attempt.channel,
            code=new_refund_code(),
            amount=amount,
            tax_amount=tax,
            currency=txn.currency,
            reason=reason,
            requested_by=requested_by,
            lines=checked_lines,
        )
        refund.save(using=DB, force_insert=True)
        txn.refund_reserved_amount += amount
        try:
            with transaction.atomic(using=DB):
                txn.save(using=DB, update_fields=["refund_reserved_amount", "updated_at"])
        except IntegrityError:
            # The database's own check (transaction_refunds_within_paid): never more than paid.
            txn.refund_reserved_amount -= amount
            raise _exceeds(txn, refundable) from None
        events.emit_refund([events.REFUND_CREATED], txn=txn, refund=refund)
    return refund


def _settle(txn: PaymentTransaction, refund: Refund, answer: ProviderAnswer) -> None:
    """Record a final answer (SUCCEEDED or FAILED) on a PENDING refund, under the transaction's lock."""
    now = timezone.now()
    action = "succeed" if answer.status == SUCCEEDED else "fail"
    target = next_refund_status(action, refund.status)
    if target is None:
        raise refund_conflict(refund, action)
    refund.status = target
    refund.provider_reference = (answer.reference or refund.provider_reference)[:128]
    if target == R.SUCCEEDED:
        refund.succeeded_at = now
        refund.save(using=DB, update_fields=["status", "provider_reference", "succeeded_at", "updated_at"])
        txn.refunded_amount += refund.amount
        move = "refund_fully" if txn.refunded_amount >= txn.paid_amount else "refund_partially"
        txn.status = next_transaction_status(move, txn.status) or txn.status
        txn.save(using=DB, update_fields=["refunded_amount", "status", "updated_at"])
        follow = events.TRANSACTION_REFUNDED if txn.status == T.REFUNDED else events.TRANSACTION_PARTIALLY_REFUNDED
        events.emit_refund([events.REFUND_SUCCEEDED, follow], txn=txn, refund=refund)
    else:
        refund.failed_at = now
        refund.failure_reason = (answer.reason or "refund failed")[:255]
        refund.save(using=DB, update_fields=["status", "provider_reference", "failed_at", "failure_reason", "updated_at"])
        txn.refund_reserved_amount -= refund.amount  # what failed may be refunded again
        txn.save(using=DB, update_fields=["refund_reserved_amount", "updated_at"])
        events.emit_refund([events.REFUND_FAILED], txn=txn, refund=refund)


def _locked(refund_id: int) -> tuple[PaymentTransaction, Refund]:
    """The refund's transaction row locked first, then the refund's (the order every write takes)."""
    refund = Refund.objects.using(DB).filter(pk=refund_id).first()
    if refund is None:
        raise NotFound("No refund has this id.")
    txn = locked_transaction(refund.transaction_id)
    return txn, Refund.objects.using(DB).select_for_update().get(pk=refund_id)


def _record(refund_id: int, answer: ProviderAnswer) -> Refund:
    """The provider's answer on a still PENDING refund: final (SUCCEEDED, FAILED) or accepted
    (PENDING: its reference kept); UNKNOWN changes nothing."""
    with transaction.atomic(using=DB):
        txn, refund = _locked(refund_id)
        if refund.status != R.PENDING:
            return refund  # a callback, the resolver or the cashier got there first
        if answer.status in (SUCCEEDED, FAILED):
            _settle(txn, refund, answer)
        elif answer.status == PENDING:
            if refund.sent_at is None or answer.reference:
                refund.sent_at = refund.sent_at or timezone.now()
                refund.provider_reference = (answer.reference or refund.provider_reference)[:128]
                refund.save(using=DB, update_fields=["sent_at", "provider_reference", "updated_at"])
        else:
            log.warning("payment.refund.unknown", refundId=str(refund.id), reason=answer.reason)
    return refund


def refund_send(*, refund_id: int) -> Refund:
    """Ask the provider for a PENDING refund not yet sent (outside any database transaction), then
    record its answer. A SYSTEM refund waits for the cashier (`refund_confirm`, `refund_fail`)."""
    refund = Refund.objects.using(DB).select_related("attempt").get(pk=refund_id)
    if refund.status != R.PENDING or refund.sent_at is not None:
        return refund
    connector, integration, reason = provider_of(refund)
    if integration is None:
        log.error("payment.refund.provider_unavailable", refundId=str(refund.id), reason=reason)
        answer = ProviderAnswer(FAILED, reason=reason)
    else:
        answer = connector.refund(
            integration=integration,
            code=refund.code,
            payment_code=refund.attempt.code,
            payment_reference=refund.attempt.provider_reference,
            amount=refund.amount,
            currency=refund.currency,
            reason=refund.reason,
        )
    return _record(refund.id, answer)


def refund_confirm(*, refund_id: int, reference: str = "") -> Refund:
    """The cashier handed a SYSTEM refund's cash back: SUCCEEDED (refund.succeeded, transaction.*)."""
    return _by_hand(refund_id, ProviderAnswer(SUCCEEDED, reference=reference), "confirm")


def refund_fail(*, refund_id: int, reason: str = "") -> Refund:
    """A SYSTEM refund that was not paid out: FAILED (refund.failed); its amount may be refunded again."""
    return _by_hand(refund_id, ProviderAnswer(FAILED, reason=reason or "failed by the caller"), "fail")


def _by_hand(refund_id: int, answer: ProviderAnswer, action: str) -> Refund:
    with transaction.atomic(using=DB):
        txn, refund = _locked(refund_id)
        if refund.channel != Channel.SYSTEM:
            raise Conflict(
                "Only a SYSTEM (cash) refund is confirmed by hand; the provider answers for this one.",
                code="REFUND_NOT_MANUAL",
                extra={"channel": refund.channel, "action": action},
            )
        if refund.status != R.PENDING:
            raise refund_conflict(refund, action)
        _settle(txn, refund, answer)
    return refund


def refund_resolve(*, refund_id: int) -> Refund:
    """Ask the provider where a PENDING refund stands (querydr) and record a final answer; PENDING,
    or a provider that cannot say, leaves it for the next round: never guessed."""
    refund = Refund.objects.using(DB).get(pk=refund_id)
    if refund.status != R.PENDING or refund.channel == Channel.SYSTEM:
        return refund
    connector, integration, reason = provider_of(refund)
    if integration is None:
        log.error("payment.refund.resolve_failed", refundId=str(refund.id), reason=reason)
        return refund
    answer = connector.query_refund(integration=integration, code=refund.code)
    if answer.status == FAILED and answer.reason == REFUND_NOT_FOUND and refund.sent_at is not None:
        # The provider took this refund and now says it never heard of it: a contradiction for an
        # operator, not a failure to record (the money may still go out).
        log.error("payment.refund.provider_forgot", refundId=str(refund.id), sentAt=refund.sent_at.isoformat())
        answer = ProviderAnswer(UNKNOWN, reason=REFUND_NOT_FOUND)
    if answer.status in (UNKNOWN, PENDING):
        log.info("payment.refund.still_pending", refundId=str(refund.id), answer=answer.status, reason=answer.reason)
        # Asked: to the back of the resolver's line, so a bank that takes days holds up no other refund.
        Refund.objects.using(DB).filter(pk=refund.id, status=R.PENDING).update(updated_at=timezone.now())
        return refund
    return _record(refund.id, answer)


def refunds_resolve_pending(*, older_than_seconds: int = RESOLVE_AFTER_SECONDS, limit: int = 100) -> int:
    """Ask the providers about PENDING refunds older than `older_than_seconds` (not SYSTEM ones: the
    cashier confirms those), the least recently asked first; returns how many were asked about."""
    stale = timezone.now() - timedelta(seconds=older_than_seconds)
    ids = list(
        Refund.objects.using(DB)
        .filter(status=R.PENDING, created_at__lt=stale)
        .exclude(channel=Channel.SYSTEM)
        .order_by("updated_at")
        .values_list("id", flat=True)[:limit]
    )
    for refund_id in ids:
        refund_resolve(refund_id=refund_id)
    return len(ids)


REQUIRED_CALLBACK_FIELDS = ("prov_RefundRef", "prov_TxnRef", "prov_Amount", "prov_ResponseCode", "prov_SecureHash")


def refund_callback(*, fields: dict) -> str:
    """The provider's signed callback with a refund's outcome; returns the IPN reply code (00
    recorded or a repeat of the recorded success, 01 unknown refund, 02 already final otherwise,
    04 wrong amount, 97 bad signature, 99 anything else). Never raises for bad input."""
    if not isinstance(fields, dict) or any(
        not isinstance(value, str | int) or isinstance(value, bool)
        for value in [*fields.values(), *map(fields.get, REQUIRED_CALLBACK_FIELDS)]
    ):
        log.warning("payment.refund_callback.malformed")
        return OTHER
    refund = (
        Refund.objects.using(DB)
        .select_related("attempt")
        .filter(code=str(fields["prov_RefundRef"]))
        .exclude(channel=Channel.SYSTEM)
        .first()
    )
    if refund is None:
        log.warning("payment.refund_callback.unknown_refund")
        return NOT_FOUND
    try:
        integration = provider_integration(merchant_id=refund.merchant_id, channel=refund.channel)
    except (NotFound, crypto.DecryptionFailed) as exc:
        log.error("payment.refund_callback.no_secret", refundId=str(refund.id), reason=getattr(exc, "code", "DECRYPT_FAILED"))
        return OTHER
    if not ipn.verify(fields, integration.credential):
        log.warning("payment.refund_callback.bad_signature", refundId=str(refund.id))
        return BAD_SIGNATURE
    if str(fields["prov_TxnRef"]) != refund.attempt.code:
        log.warning("payment.refund_callback.other_payment", refundId=str(refund.id))
        return NOT_FOUND
    amount = str(fields["prov_Amount"])
    if not amount.isdigit() or int(amount) != refund.amount * 100:
        log.warning("payment.refund_callback.wrong_amount", refundId=str(refund.id))
        return WRONG_AMOUNT
    success = str(fields["prov_ResponseCode"]) == "00"
    reference = str(fields.get("prov_RefundNo") or "")
    with transaction.atomic(using=DB):
        txn, refund = _locked(refund.id)
        if refund.status == R.SUCCEEDED:
            return CONFIRMED if success else ALREADY_CONFIRMED  # the provider's retry: nothing changes
        if refund.status != R.PENDING:
            if success:
                log.error("payment.refund_callback.late_success", refundId=str(refund.id), refundStatus=refund.status)
            return ALREADY_CONFIRMED
        reason = "" if success else f"provider response {str(fields['prov_ResponseCode'])[:32]}"
        _settle(txn, refund, ProviderAnswer(SUCCEEDED if success else FAILED, reference=reference, reason=reason))
    return CONFIRMED
