"""Kafka handlers of finance (consumer group SVC-00040-FINANCE_CONSUMER_GROUP, spec 6.2):

- `cdc.commerce.merchant` (MERCHANT stream): a live merchant gets its default chart of accounts in
  its default currency, with the control accounts INVENTORY and COGS.
- `payment.success`: a successful payment attempt posts a SALE voucher to the finance account the
  sale side chose (`attempt.financeAccountId`); without one the message is skipped with an info log.
- `inventory.cogs` and `inventory.stock-adjusted`: COGS and INVENTORY_ADJUSTMENT vouchers.

The shapes read here are documented in docs/events.md ("Finance's inputs"). Idempotent twice over:
the runner records each message id with the handler's effect, and every voucher is unique by its
source (attempt, order, adjustment), so a replay, even re-published under a new message id, finds
the existing voucher and logs `finance.voucher.idempotent_replay`. A value no retry can fix is
parked on the DLQ at once (UndecodableMessage); anything else is retried, then parked.
"""

from __future__ import annotations

import datetime

from apps.finance import services
from merchant_platform.cdc import InvalidChangeEvent, parse_change_event
from merchant_platform.logging import get_logger
from merchant_platform.messaging import Message, consumer, topics
from merchant_platform.messaging.messages import UndecodableMessage

MERCHANT_CONSUMER = "finance.merchant"
PAYMENT_CONSUMER = "finance.payment-success"
COGS_CONSUMER = "finance.inventory-cogs"
ADJUSTMENT_CONSUMER = "finance.inventory-adjusted"
SUCCESS_EVENTS = {"pay:attempt.success", "attempt.success", "ATTEMPT_SUCCESS"}
log = get_logger(__name__)


def _object(value, name: str) -> dict:
    if not isinstance(value, dict):
        raise UndecodableMessage(f"{name}: a JSON object is required")
    return value


def _id(value, name: str) -> int:
    try:
        number = int(str(value), 10)
    except (TypeError, ValueError):
        number = 0
    if not 0 < number < 2**63:
        raise UndecodableMessage(f"{name}: an id (a positive 64-bit integer) is required")
    return number


def _token(value, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value) or len(str(value)) > 128:
        raise UndecodableMessage(f"{name}: a string of 1-128 characters is required")
    return str(value)


def _amount(value, name: str, *, signed: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (not signed and value < 0) or abs(value) > services.MAX_AMOUNT:
        raise UndecodableMessage(f"{name}: a whole number of minor units is required")
    return value


def _currency(value, name: str) -> str:
    if not isinstance(value, str) or len(value) != 3 or not value.isalpha() or not value.isupper():
        raise UndecodableMessage(f"{name}: an ISO 4217 currency code is required")
    return value


def _date(value) -> datetime.date | None:
    """The event's day (its ISO `timestamp`), else today."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).date()
    except ValueError:
        return None


@consumer(MERCHANT_CONSUMER, topics=[topics.MERCHANT_CHANGES])
def merchant_changed(message: Message) -> None:
    try:
        event = parse_change_event(message.value)
    except InvalidChangeEvent as exc:
        raise UndecodableMessage(f"not a change event: {exc}") from None
    if event is None:  # the tombstone after a hard delete
        return
    row = event.row
    if event.op == "d" or row.get("deleted_at") is not None:
        return  # books outlive their merchant: nothing is removed
    services.accounts_ensure_defaults(
        merchant_id=_id(row.get("id"), "id"),
        currency=_currency(row.get("default_currency"), "default_currency"),
        created_by=row.get("created_by"),
    )


@consumer(PAYMENT_CONSUMER, topics=[topics.PAYMENT_SUCCESS])
def payment_success(message: Message) -> None:
    value = _object(message.value, "value")
    event = value.get("event")
    if event is not None and event not in SUCCESS_EVENTS:
        log.info("finance.payment.skipped", reason="not an attempt success", paymentEvent=str(event)[:64])
        return
    attempt = _object(value.get("attempt"), "attempt")
    account_id = attempt.get("financeAccountId")
    if account_id in (None, ""):
        log.info("finance.payment.skipped", reason="no financeAccountId", attemptId=str(attempt.get("id"))[:64])
        return
    transaction = value.get("transaction") if isinstance(value.get("transaction"), dict) else {}
    currency = attempt.get("currency") or transaction.get("currency")
    services.sale_post_from_payment(
        finance_account_id=_id(account_id, "attempt.financeAccountId"),
        amount=_amount(attempt.get("amount"), "attempt.amount"),
        attempt_id=_token(attempt.get("id") or attempt.get("code"), "attempt.id"),
        currency=None if currency is None else _currency(currency, "attempt.currency"),
        date=_date(value.get("timestamp")),
    )


@consumer(COGS_CONSUMER, topics=[topics.INVENTORY_COGS])
def inventory_cogs(message: Message) -> None:
    value = _object(message.value, "value")
    services.cogs_post(
        merchant_id=_id(value.get("merchantId"), "merchantId"),
        order_id=_token(value.get("orderId"), "orderId"),
        currency=_currency(value.get("currency"), "currency"),
        amount=_amount(value.get("totalCostAmount"), "totalCostAmount"),
    )


@consumer(ADJUSTMENT_CONSUMER, topics=[topics.INVENTORY_ADJUSTED])
def inventory_adjusted(message: Message) -> None:
    value = _object(message.value, "value")
    kind = _token(value.get("kind", "ADJUSTMENT"), "kind")
    reason = value.get("reason") if isinstance(value.get("reason"), str) else ""
    services.inventory_adjustment_post(
        merchant_id=_id(value.get("merchantId"), "merchantId"),
        reference=f"{kind}:{_token(value.get('referenceId'), 'referenceId')}",
        currency=_currency(value.get("currency"), "currency"),
        value=_amount(value.get("totalValueAmount"), "totalValueAmount", signed=True),
        reason=reason[:100],
    )
