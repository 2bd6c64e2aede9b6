"""Kafka handlers of finance (consumer group SVC-00040-FINANCE_CONSUMER_GROUP, spec 6.2):

- `cdc.commerce.merchant` (MERCHANT stream): a live merchant gets its default chart of accounts in
  its default currency, with the control accounts INVENTORY and COGS.
- `payment.success`: a successful payment attempt (`attempt.success`, one message each) posts a
  SALE voucher to the finance account the sale side chose (`attempt.financeAccountId`); without one
  the message is skipped with an info log. `payment.events` (every event of every payment) is not
  read: its `attempt.success` bodies are the same.
- `payment.refunded`: a succeeded refund (`refund.succeeded`, one message each) posts a REFUND
  voucher, the sale's posting reversed for the refunded amount, on the finance account of the
  refunded transaction; without one the message is skipped with an info log, as a sale is.
- `inventory.cogs` and `inventory.stock-adjusted`: COGS and INVENTORY_ADJUSTMENT vouchers;
  `inventory.returned`: a COGS_RETURN voucher per refund's restocked goods (COGS back to INVENTORY).

The shapes read here are documented in docs/events.md ("Finance's inputs"). Idempotent twice over:
the runner records each message id with the handler's effect, and every voucher is unique by its
source (attempt, refund, order, returned refund, adjustment), so a replay, even re-published under a
new message id, finds the existing voucher and logs `finance.voucher.idempotent_replay`. A value no
retry can fix is parked on the DLQ at once (UndecodableMessage); anything else is retried, then
parked.
"""

from __future__ import annotations

import datetime
from contextlib import contextmanager

from apps.finance import services
from merchant_platform.cdc import InvalidChangeEvent, parse_change_event
from merchant_platform.errors import ApiError, InvalidInput
from merchant_platform.logging import get_logger
from merchant_platform.messaging import Message, consumer, topics
from merchant_platform.messaging.messages import UndecodableMessage
from merchant_platform.money import AMOUNT_TOO_LARGE, BALANCE_LIMIT_EXCEEDED, MAX_AMOUNT

MERCHANT_CONSUMER = "finance.merchant"
PAYMENT_CONSUMER = "finance.payment-success"
COGS_CONSUMER = "finance.inventory-cogs"
ADJUSTMENT_CONSUMER = "finance.inventory-adjusted"
REFUND_CONSUMER = "finance.payment-refunded"
RETURNED_CONSUMER = "finance.inventory-returned"
SUCCESS_EVENTS = {"attempt.success", "pay:attempt.success", "ATTEMPT_SUCCESS"}
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
    if isinstance(value, bool) or not isinstance(value, int) or (not signed and value < 0):
        raise UndecodableMessage(f"{name}: a whole number of minor units is required")
    if abs(value) > MAX_AMOUNT:
        raise UndecodableMessage(f"{name}: {AMOUNT_TOO_LARGE}: one amount is at most {MAX_AMOUNT} minor units")
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


@contextmanager
def _refusals_parked():
    """A refusal no retry can fix parks the message on the DLQ at once, the refusal as its reason
    (the runner's `dlq.error` header): a record of another merchant, a balance past MAX_BALANCE, an
    account not kept in the payment's currency. Anything else (an unknown account, a missing
    control account: the MERCHANT stream may not have arrived yet) is retried, then parked."""
    try:
        yield
    except InvalidInput as exc:
        raise UndecodableMessage(str(exc) if isinstance(exc, services.ForeignReference) else _fields(exc.detail)) from exc
    except ApiError as exc:
        if exc.code not in (BALANCE_LIMIT_EXCEEDED, AMOUNT_TOO_LARGE):
            raise
        raise UndecodableMessage(f"{exc.code}: {exc.detail} {exc.extra.get('accountId', '')}".rstrip()) from exc


def _fields(detail) -> str:
    return "; ".join(f"{field}: {' '.join(map(str, messages))}" for field, messages in detail.items())


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


def _payment(message: Message) -> dict | None:
    """The posting a payment event asks for, or None (not an attempt success, or no finance account)."""
    value = _object(message.value, "value")
    if value.get("event") not in SUCCESS_EVENTS:
        return None  # created, sent, failed, expired, cancelled, settled: no money collected by an attempt
    attempt = _object(value.get("attempt"), "attempt")
    account_id = attempt.get("financeAccountId")
    if account_id in (None, ""):
        log.info("finance.payment.skipped", reason="no financeAccountId", attemptId=str(attempt.get("id"))[:64])
        return None
    transaction = value.get("transaction") if isinstance(value.get("transaction"), dict) else {}
    order = value.get("order") if isinstance(value.get("order"), dict) else {}
    currency = attempt.get("currency") or transaction.get("currency")
    # The payment's merchant, which the finance account must belong to: every part of the event
    # that names one must name the same.
    merchants = {
        name: _id(part["merchantId"], name)
        for name, part in (("attempt.merchantId", attempt), ("transaction.merchantId", transaction), ("order.merchantId", order))
        if part.get("merchantId") is not None
    }
    if not merchants:
        raise UndecodableMessage("attempt.merchantId: the payment's merchant is required")
    if len(set(merchants.values())) > 1:
        raise UndecodableMessage(f"merchantId: the event names different merchants ({', '.join(f'{k}={v}' for k, v in merchants.items())})")
    amount = _amount(attempt.get("amount"), "attempt.amount")
    return {
        "finance_account_id": _id(account_id, "attempt.financeAccountId"),
        "amount": amount,
        "tax_amount": _attempt_tax(transaction, amount),
        "attempt_id": _token(attempt.get("id") or attempt.get("code"), "attempt.id"),
        "merchant_id": next(iter(merchants.values())),
        "currency": None if currency is None else _currency(currency, "attempt.currency"),
        "date": _date(value.get("timestamp")),
    }


def _attempt_tax(transaction: dict, amount: int) -> int:
    """The tax inside this attempt's amount: the transaction's `taxAmount` (the tax its `amount`
    includes), shared by the paid amounts (`paidAmount` is the transaction's after this attempt);
    0 when the event carries none."""
    if transaction.get("taxAmount") is None:
        return 0
    total = _amount(transaction.get("amount"), "transaction.amount")
    tax = _amount(transaction.get("taxAmount"), "transaction.taxAmount")
    if tax > total:
        raise UndecodableMessage("transaction.taxAmount: the tax included in the transaction is at most its amount")
    paid_after = _amount(transaction.get("paidAmount", amount), "transaction.paidAmount")
    return services.attempt_tax(tax_amount=tax, transaction_amount=total, paid_before=paid_after - amount, paid_after=paid_after)


def _refund(message: Message) -> dict | None:
    """The REFUND posting a payment.refunded message asks for, or None (no finance account). Every
    part of the message that names the refund's merchant, transaction, finance account or currency
    must name the same one."""
    value = _object(message.value, "value")
    if value.get("event") != "refund.succeeded":
        raise UndecodableMessage(f"event: payment.refunded carries refund.succeeded, not {str(value.get('event'))[:64]!r}")
    refund = _object(value.get("refund"), "refund")
    transaction = _object(value.get("transaction"), "transaction")
    if refund.get("status") != "SUCCEEDED":
        raise UndecodableMessage(f"refund.status: only a SUCCEEDED refund is posted, not {str(refund.get('status'))[:32]!r}")
    refund_id = _id(refund.get("id"), "refund.id")
    transaction_id = _id(refund.get("transactionId"), "refund.transactionId")
    if transaction.get("id") is not None and _id(transaction["id"], "transaction.id") != transaction_id:
        raise UndecodableMessage("transaction.id: the refund is of another transaction (refund.transactionId)")
    merchant_id = _id(refund.get("merchantId"), "refund.merchantId")
    if transaction.get("merchantId") is not None and _id(transaction["merchantId"], "transaction.merchantId") != merchant_id:
        raise UndecodableMessage("merchantId: the refund and its transaction name different merchants")
    accounts = {
        _id(part["financeAccountId"], f"{name}.financeAccountId")
        for name, part in (("refund", refund), ("transaction", transaction))
        if part.get("financeAccountId") not in (None, "")
    }
    if not accounts:
        log.info("finance.refund.skipped", reason="no financeAccountId", refundId=str(refund_id))
        return None
    if len(accounts) > 1:
        raise UndecodableMessage("financeAccountId: the refund and its transaction name different finance accounts")
    currency = _currency(refund.get("currency"), "refund.currency")
    if transaction.get("currency") not in (None, currency):
        raise UndecodableMessage(f"refund.currency: the refund is in {currency}, its transaction in {str(transaction['currency'])[:3]}")
    amount = _amount(refund.get("amount"), "refund.amount")
    if amount == 0:
        raise UndecodableMessage("refund.amount: a refund is at least 1 minor unit")
    if transaction.get("paidAmount") is not None and amount > _amount(transaction["paidAmount"], "transaction.paidAmount"):
        raise UndecodableMessage("refund.amount: more than the transaction's paidAmount")
    tax = _amount(refund.get("taxAmount", 0), "refund.taxAmount")
    if tax > amount:
        raise UndecodableMessage("refund.taxAmount: the tax included in a refund is at most its amount")
    reason = refund.get("reason")
    return {
        "refund_id": refund_id,
        "transaction_id": transaction_id,
        "finance_account_id": accounts.pop(),
        "merchant_id": merchant_id,
        "amount": amount,
        "tax_amount": tax,
        "currency": currency,
        "reason": reason if isinstance(reason, str) else "",
        "date": _date(refund.get("succeededAt")) or _date(value.get("timestamp")),
    }


def _returned(message: Message) -> dict:
    """The COGS_RETURN posting an inventory.returned message asks for: its total must be the sum
    of its lines' costs; a cost of 0 (goods without a cost, or without a currency) posts nothing."""
    value = _object(message.value, "value")
    amount = _amount(value.get("totalCostAmount"), "totalCostAmount")
    lines = value.get("lines")
    if not isinstance(lines, list) or not lines:
        raise UndecodableMessage("lines: the restocked lines of the refund are required")
    costs = sum(_amount(_object(line, f"lines.{n}").get("costAmount"), f"lines.{n}.costAmount") for n, line in enumerate(lines))
    if costs != amount:
        raise UndecodableMessage(f"totalCostAmount: {amount} is not the sum of the lines' costAmount ({costs})")
    currency = value.get("currency")
    return {
        "merchant_id": _id(value.get("merchantId"), "merchantId"),
        "refund_id": _id(value.get("refundId"), "refundId"),
        "order_id": _token(value.get("orderId"), "orderId"),
        "currency": _currency(currency, "currency") if amount else "",
        "amount": amount,
    }


# Batch handlers (docs/events.md, "Consuming"): a poll's messages post with a fixed number of
# statements; when one fails, the runner hands each message alone, retries it and parks it.


@consumer(PAYMENT_CONSUMER, topics=[topics.PAYMENT_SUCCESS], batch=True)
def payment_success(messages: list[Message]) -> None:
    payments = [payment for payment in map(_payment, messages) if payment is not None]
    if payments:
        with _refusals_parked():
            services.sales_post_from_payments(payments=payments)


@consumer(COGS_CONSUMER, topics=[topics.INVENTORY_COGS], batch=True)
def inventory_cogs(messages: list[Message]) -> None:
    orders = []
    for message in messages:
        value = _object(message.value, "value")
        orders.append(
            {
                "merchant_id": _id(value.get("merchantId"), "merchantId"),
                "order_id": _token(value.get("orderId"), "orderId"),
                "currency": _currency(value.get("currency"), "currency"),
                "amount": _amount(value.get("totalCostAmount"), "totalCostAmount"),
            }
        )
    with _refusals_parked():
        services.cogs_post_many(orders=orders)


@consumer(ADJUSTMENT_CONSUMER, topics=[topics.INVENTORY_ADJUSTED], batch=True)
def inventory_adjusted(messages: list[Message]) -> None:
    adjustments = []
    for message in messages:
        value = _object(message.value, "value")
        kind = _token(value.get("kind", "ADJUSTMENT"), "kind")
        reason = value.get("reason") if isinstance(value.get("reason"), str) else ""
        adjustments.append(
            {
                "merchant_id": _id(value.get("merchantId"), "merchantId"),
                "reference": f"{kind}:{_token(value.get('referenceId'), 'referenceId')}",
                "currency": _currency(value.get("currency"), "currency"),
                "value": _amount(value.get("totalValueAmount"), "totalValueAmount", signed=True),
                "reason": reason[:100],
            }
        )
    with _refusals_parked():
        services.inventory_adjustments_post(adjustments=adjustments)


@consumer(REFUND_CONSUMER, topics=[topics.PAYMENT_REFUNDED], batch=True)
def payment_refunded(messages: list[Message]) -> None:
    refunds = [refund for refund in map(_refund, messages) if refund is not None]
    if refunds:
        with _refusals_parked():
            services.refunds_post(refunds=refunds)


@consumer(RETURNED_CONSUMER, topics=[topics.INVENTORY_RETURNED], batch=True)
def inventory_returned(messages: list[Message]) -> None:
    returns = [_returned(message) for message in messages]
    with _refusals_parked():
        services.cogs_returns_post(returns=returns)
