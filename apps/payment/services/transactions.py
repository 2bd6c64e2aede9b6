"""Transactions and their attempts as the merchant's side opens and cancels them (spec 7: a retried
creation answers from its sourceId). Sending an attempt to its provider: attempts.py."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.payment import events
from apps.payment.models import Channel, PaymentAttempt, PaymentTransaction
from apps.payment.services.records import DB, A, T, check_amount, locked_transaction, move_attempt, transaction_conflict
from apps.payment.states import OPEN_ATTEMPT_STATES, next_transaction_status
from merchant_platform import references
from merchant_platform.errors import Conflict, InvalidInput, NotFound

CURRENCY = re.compile(r"^[A-Z]{3}$")


def new_attempt_code() -> str:
    """prov_TxnRef: 128 random bits, URL- and form-safe."""
    return "PA" + secrets.token_hex(16).upper()


def _check(amount: int, currency: str) -> None:
    if amount <= 0:
        raise InvalidInput({"amount": "Must be a positive number of minor units."})
    check_amount(amount)
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
        txn = locked_transaction(transaction_id)
        if next_transaction_status("settle", txn.status) is None:
            raise transaction_conflict(txn, "take an attempt")
        if txn.attempts.using(DB).filter(status__in=OPEN_ATTEMPT_STATES).exists():
            raise Conflict("The transaction has an open attempt: cancel it or wait for it.", code="ATTEMPT_OPEN")
        remaining = txn.amount - txn.paid_amount
        amount = remaining if amount is None else amount
        check_amount(amount)
        if amount <= 0 or amount > remaining:
            raise InvalidInput({"amount": f"Must be between 1 and the {remaining} left to pay."})
        attempt = _add_attempt(txn, channel=channel, amount=amount)
        events.emit(events.ATTEMPT_CREATED, txn=txn, attempt=attempt)
    return attempt


def transaction_cancel(*, transaction_id: int) -> PaymentTransaction:
    """Cancel a NEW transaction: each open attempt is cancelled (attempt.cancelled), then the
    transaction (transaction.cancelled). Refused (409 ATTEMPT_UNRESOLVED) while an attempt is
    UNKNOWN: the provider may have taken the money."""
    with transaction.atomic(using=DB):
        txn = locked_transaction(transaction_id)
        if next_transaction_status("cancel", txn.status) is None:
            raise transaction_conflict(txn, "cancel")
        attempts = list(txn.attempts.using(DB).select_for_update().filter(status__in=OPEN_ATTEMPT_STATES).order_by("id"))
        if any(attempt.status == A.UNKNOWN for attempt in attempts):
            raise Conflict("An attempt is waiting for the provider's answer; cancel once it is resolved.", code="ATTEMPT_UNRESOLVED")
        for attempt in attempts:
            move_attempt(attempt, "cancel")
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
        txn = locked_transaction(attempt.transaction_id)
        attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt_id)
        move_attempt(attempt, "cancel")
        events.emit(events.ATTEMPT_CANCELLED, txn=txn, attempt=attempt)
    return attempt
