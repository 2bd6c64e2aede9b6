"""Payment events (spec 6.1, 2.5): `emit_event(type, payload)` adds `event`, `timestamp` and `source`
and hands the body to every registered handler (`handle`, `is_ready`, `get_name`).

Handlers run inside the caller's database transaction on payment's alias: the Kafka events go
through the outbox, the webhook deliveries are rows, the WebSocket broadcast is sent on commit. So an
event exists if and only if the state change it announces committed. Bodies: docs/events.md.
"""

from __future__ import annotations

from typing import Protocol

from django.utils import timezone

from merchant_platform import realtime
from merchant_platform.logging import get_logger
from merchant_platform.messaging import Outgoing, publish_all, topics

log = get_logger(__name__)

DB = "payment"
SOURCE = "payment"

TRANSACTION_CREATED = "transaction.created"
TRANSACTION_SETTLED = "transaction.settled"
TRANSACTION_CANCELLED = "transaction.cancelled"
ATTEMPT_CREATED = "attempt.created"
ATTEMPT_SENT = "attempt.sent"
ATTEMPT_SUCCESS = "attempt.success"
ATTEMPT_FAILED = "attempt.failed"
ATTEMPT_EXPIRED = "attempt.expired"
ATTEMPT_CANCELLED = "attempt.cancelled"
REFUND_CREATED = "refund.created"
REFUND_SUCCEEDED = "refund.succeeded"
REFUND_FAILED = "refund.failed"
TRANSACTION_REFUNDED = "transaction.refunded"
TRANSACTION_PARTIALLY_REFUNDED = "transaction.partially_refunded"
EVENT_TYPES = (
    TRANSACTION_CREATED,
    TRANSACTION_SETTLED,
    TRANSACTION_CANCELLED,
    ATTEMPT_CREATED,
    ATTEMPT_SENT,
    ATTEMPT_SUCCESS,
    ATTEMPT_FAILED,
    ATTEMPT_EXPIRED,
    ATTEMPT_CANCELLED,
    REFUND_CREATED,
    REFUND_SUCCEEDED,
    REFUND_FAILED,
    TRANSACTION_REFUNDED,
    TRANSACTION_PARTIALLY_REFUNDED,
)
# Spec 2.5: these carry the attempt only (with its transactionId and financeAccountId).
ATTEMPT_ONLY = frozenset({ATTEMPT_FAILED, ATTEMPT_EXPIRED, ATTEMPT_CANCELLED})


class EventHandler(Protocol):
    def handle(self, payload: dict) -> None: ...

    def is_ready(self) -> bool: ...

    def get_name(self) -> str: ...


_handlers: list[EventHandler] = []


def register_handler(handler: EventHandler) -> None:
    if all(existing.get_name() != handler.get_name() for existing in _handlers):
        _handlers.append(handler)


def handlers() -> tuple[EventHandler, ...]:
    return tuple(_handlers)


def emit_event(event_type: str, payload: dict) -> dict:
    """Emit one event to every ready handler; returns the body they received."""
    return emit_events([(event_type, payload)])[0]


def emit_events(events: list[tuple[str, dict]]) -> list[dict]:
    """Emit several events of one state change, in order; returns their bodies. A handler with
    `handle_many(bodies)` gets them together (one outbox INSERT, one webhook-config read), any
    other one by one through `handle`."""
    for event_type, _payload in events:
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown payment event {event_type!r}")
    now = timezone.now().isoformat()
    bodies = [{"event": event_type, "timestamp": now, "source": SOURCE, **payload} for event_type, payload in events]
    for handler in _handlers:
        if not handler.is_ready():
            for body in bodies:
                log.warning("payment.event.handler_not_ready", handler=handler.get_name(), eventType=body["event"])
        elif hasattr(handler, "handle_many"):
            handler.handle_many(bodies)
        else:
            for body in bodies:
                handler.handle(body)
    return bodies


def transaction_body(txn) -> dict:
    return {
        "id": str(txn.id),
        "merchantId": str(txn.merchant_id),
        "sourceType": txn.source_type,
        "sourceId": txn.source_id,
        "amount": txn.amount,
        "paidAmount": txn.paid_amount,
        "taxAmount": txn.tax_amount,
        "currency": txn.currency,
        "financeAccountId": None if txn.finance_account_id is None else str(txn.finance_account_id),
        "lines": txn.lines,
        "status": txn.status,
        "createdAt": txn.created_at.isoformat() if txn.created_at else None,
        "settledAt": txn.settled_at.isoformat() if txn.settled_at else None,
        "cancelledAt": txn.cancelled_at.isoformat() if txn.cancelled_at else None,
    }


def _opening(record, txn) -> dict:
    """What an attempt's and a refund's events open with: the record, its transaction and its source."""
    return {
        "id": str(record.id),
        "transactionId": str(record.transaction_id),
        "merchantId": str(record.merchant_id),
        "sourceType": txn.source_type,
        "sourceId": txn.source_id,
        "financeAccountId": None if txn.finance_account_id is None else str(txn.finance_account_id),
    }


def attempt_body(attempt, txn) -> dict:
    return {
        **_opening(attempt, txn),
        "channel": attempt.channel,
        "code": attempt.code,
        "amount": attempt.amount,
        "currency": txn.currency,
        "status": attempt.status,
        "providerReference": attempt.provider_reference,
        "bankCode": attempt.bank_code,
        "failureReason": attempt.failure_reason,
        "expiresAt": attempt.expires_at.isoformat() if attempt.expires_at else None,
        "paidAt": attempt.paid_at.isoformat() if attempt.paid_at else None,
    }


def refund_body(refund, txn) -> dict:
    """A refund as its events carry it (contract PAYMENT_REFUND)."""
    return {
        **_opening(refund, txn),
        "amount": refund.amount,
        "taxAmount": refund.tax_amount,
        "currency": refund.currency,
        "reason": refund.reason,
        "status": refund.status,
        "providerReference": refund.provider_reference,
        "failureReason": refund.failure_reason,
        "requestedBy": None if refund.requested_by is None else str(refund.requested_by),
        "lines": refund.lines,
        "createdAt": refund.created_at.isoformat() if refund.created_at else None,
        "succeededAt": refund.succeeded_at.isoformat() if refund.succeeded_at else None,
        "failedAt": refund.failed_at.isoformat() if refund.failed_at else None,
    }


def emit_refund(event_types: list[str], *, txn, refund) -> list[dict]:
    """The events of one refund's change, together in this order: each carries the transaction (with
    its refundedAmount as it now is) and the refund."""
    payload = {"transaction": {**transaction_body(txn), "refundedAmount": txn.refunded_amount}, "refund": refund_body(refund, txn)}
    return emit_events([(event_type, payload) for event_type in event_types])


def event_payload(event_type: str, *, txn, attempt=None) -> dict:
    """The spec 2.5 body of `event_type` for these records (before emit_event adds its envelope)."""
    payload: dict = {}
    if event_type not in ATTEMPT_ONLY:
        payload["transaction"] = transaction_body(txn)
    if attempt is not None:
        payload["attempt"] = attempt_body(attempt, txn)
    return payload


def emit(event_type: str, *, txn, attempt=None) -> dict:
    """The spec 2.5 body of `event_type` for these records, emitted."""
    return emit_event(event_type, event_payload(event_type, txn=txn, attempt=attempt))


def emit_many(event_types: list[str], *, txn, attempt=None) -> list[dict]:
    """Several events about the same records, emitted together in this order."""
    return emit_events([(event_type, event_payload(event_type, txn=txn, attempt=attempt)) for event_type in event_types])


def merchant_of(body: dict) -> str:
    return (body.get("transaction") or body.get("attempt"))["merchantId"]


class BatchHandler:
    """A handler, always ready, that takes the events of one state change together in its
    `handle_many(bodies)`; `handle` hands it one event alone."""

    name = ""

    def get_name(self) -> str:
        return self.name

    def is_ready(self) -> bool:
        return True

    def handle(self, payload: dict) -> None:
        self.handle_many([payload])


class KafkaHandler(BatchHandler):
    """Every event on `payment.events` (keyed by the transaction id); each attempt.success also on
    `payment.success` (keyed by the sale order, i.e. the transaction's sourceId), with the paid
    order's lines, for inventory (stock) and finance (the SALE voucher); each refund.succeeded also
    on `payment.refunded` (keyed by the transaction id), for inventory (restock) and finance (the
    REFUND voucher). Bodies: docs/events.md."""

    name = "kafka"

    def handle_many(self, payloads: list[dict]) -> None:
        messages = []
        for payload in payloads:
            transaction_id = payload["transaction"]["id"] if "transaction" in payload else payload["attempt"]["transactionId"]
            messages.append(Outgoing(topics.PAYMENT_EVENTS.name, payload, payload["event"], transaction_id))
            if payload["event"] == ATTEMPT_SUCCESS:
                txn = payload["transaction"]
                # What consumers check ownership and kind on: the merchant, the transaction, whether it is a sale order.
                order = {
                    "merchantId": txn["merchantId"],
                    "transactionId": txn["id"],
                    "sourceType": txn["sourceType"],
                    "lines": txn["lines"],
                }
                messages.append(Outgoing(topics.PAYMENT_SUCCESS.name, {**payload, "order": order}, ATTEMPT_SUCCESS, txn["sourceId"]))
            elif payload["event"] == REFUND_SUCCEEDED:
                messages.append(Outgoing(topics.PAYMENT_REFUNDED.name, payload, REFUND_SUCCEEDED, transaction_id))
        publish_all(messages, using=DB)


class WebSocketHandler:
    """The merchant's payment room `merchant.<merchantId>.payment` (signal lets the merchant's members
    join it: docs/services/signal.md, Rooms), event `payment.<event>`."""

    def get_name(self) -> str:
        return "websocket"

    def is_ready(self) -> bool:
        return True

    def handle(self, payload: dict) -> None:
        realtime.broadcast(f"merchant.{merchant_of(payload)}.payment", f"payment.{payload['event']}", payload, using=DB)


register_handler(KafkaHandler())
register_handler(WebSocketHandler())
