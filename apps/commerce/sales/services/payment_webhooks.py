"""Payment webhooks in: signature checks, settlements applied to the orders they pay and refund
outcomes to the returns they end (or either recorded as unmatched)."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.commerce.sales.models import (
    PaymentSubscription,
    PaymentWebhookReceipt,
    SaleOrder,
    SaleReturn,
    UnmatchedRefund,
    UnmatchedSettlement,
)
from apps.commerce.sales.services.closing import order_expire_if_unpaid
from apps.commerce.sales.services.records import DB, SECRET_PURPOSE, S
from apps.commerce.sales.services.refunds import awaiting_refund_id, refund_mismatch, return_outcome
from apps.commerce.sales.services.settlement import close_order, id_of, mark_paid, release_reservation, settlement_mismatch
from merchant_platform import crypto
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger

log = get_logger(__name__)


def webhook_verify(*, merchant_id: int, body: bytes, headers: dict) -> dict:
    """The payload of a webhook payment signed for this merchant's subscription (Standard Webhooks:
    signature over `id.timestamp.body`, timestamp within 5 minutes), else 401 WEBHOOK_SIGNATURE_INVALID."""
    subscription = PaymentSubscription.objects.filter(merchant_id=merchant_id).first()
    if subscription is None:
        raise NotFound("This merchant has no payment subscription.")
    secret = crypto.decrypt(subscription.sealed_secret, purpose=SECRET_PURPOSE, associated_data=str(merchant_id).encode())
    try:
        payload = Webhook(secret).verify(body, headers)
    except (WebhookVerificationError, ValueError) as exc:
        log.warning("commerce.webhook.refused", merchantId=str(merchant_id), reason=str(exc)[:80])
        raise ApiError("The webhook signature or timestamp does not verify.", code="WEBHOOK_SIGNATURE_INVALID", status_code=401) from None
    if not isinstance(payload, dict):
        raise InvalidInput({"body": "Give a JSON object."})
    return payload


def _reported(values: dict, *, transaction_key: str) -> dict:
    """The transaction id (under `transaction_key`), reference, amount and currency a webhook
    reported, as sent (text, cut to their columns): what an unmatched record keeps."""
    amount = values.get("amount")
    return {
        "transaction_id": str(values.get(transaction_key) or "")[:64],
        "source_id": str(values.get("sourceId") or "")[:255],
        "amount": str(amount if amount is not None else "")[:64],
        "currency": str(values.get("currency") or "")[:16],
    }


def _record_unmatched(*, merchant_id: int, message_id: str, reason: str, txn: dict, payload: dict, order: SaleOrder | None) -> None:
    """Inside the webhook's transaction: the settlement kept for reconciliation, and an error log."""
    reported = _reported(txn, transaction_key="id")
    UnmatchedSettlement.objects.create(
        message_id=message_id[:255],
        merchant_id=merchant_id,
        reason=reason,
        **reported,
        order_id=None if order is None else order.id,
        payload=payload,
    )
    log.error(
        "commerce.settlement.unmatched",
        merchantId=str(merchant_id),
        reason=reason,
        transactionId=reported["transaction_id"],
        reference=reported["source_id"],
        orderId=None if order is None else str(order.id),
    )


REFUND_OUTCOMES = {"refund.succeeded": SaleReturn.Status.SUCCEEDED, "refund.failed": SaleReturn.Status.FAILED}


def _record_unmatched_refund(*, merchant_id: int, message_id: str, reason: str, payload: dict, order, sale_return) -> str:
    """Inside the webhook's transaction: the refund outcome kept for reconciliation, and an error log."""
    refund = payload.get("refund") if isinstance(payload.get("refund"), dict) else {}
    refund_id = str(refund.get("id") or "")[:64]
    reported = _reported(refund, transaction_key="transactionId")
    UnmatchedRefund.objects.create(
        message_id=message_id[:255],
        merchant_id=merchant_id,
        event_type=str(payload.get("event"))[:64],
        reason=reason,
        refund_id=refund_id,
        **reported,
        order_id=None if order is None else order.id,
        return_id=None if sale_return is None else sale_return.id,
        payload=payload,
    )
    log.error(
        "commerce.refund.unmatched",
        merchantId=str(merchant_id),
        reason=reason,
        refundId=refund_id,
        transactionId=reported["transaction_id"],
        orderId=None if order is None else str(order.id),
    )
    return "unmatched"


def _apply_refund(*, merchant_id: int, message_id: str, payload: dict) -> str:
    """Inside the webhook's transaction (its receipt written): a refund's outcome applied to the
    return it ends, when the refund is the one payment answered for that return of an order this
    merchant placed with that transaction; anything else is recorded, never applied. A refund that
    may be a return whose submission's answer is not recorded yet is refused (409, no receipt kept)
    so that payment delivers it again."""
    U = UnmatchedRefund.Reason
    refund = payload.get("refund") if isinstance(payload.get("refund"), dict) else {}
    txn = payload.get("transaction") if isinstance(payload.get("transaction"), dict) else {}
    transaction_id = id_of(refund.get("transactionId"))
    order = (
        SaleOrder.objects.select_for_update().filter(merchant_id=merchant_id, payment_transaction_id=transaction_id).first()
        if transaction_id is not None
        else None
    )
    unmatched = {"merchant_id": merchant_id, "message_id": message_id, "payload": payload, "order": order}
    if order is None:
        return _record_unmatched_refund(**unmatched, reason=U.UNKNOWN_TRANSACTION, sale_return=None)
    PaymentWebhookReceipt.objects.filter(pk=message_id[:255]).update(order_id=order.id)
    refund_id = id_of(refund.get("id"))
    sale_return = (
        SaleReturn.objects.select_for_update().filter(order=order, payment_refund_id=refund_id).first() if refund_id is not None else None
    )
    if sale_return is None:
        if str(refund.get("merchantId")) == str(merchant_id) and awaiting_refund_id(order, refund):
            raise Conflict("This refund's return is still being recorded; deliver it again later.", code="REFUND_NOT_YET_RECORDED")
        return _record_unmatched_refund(**unmatched, reason=U.UNKNOWN_REFUND, sale_return=None)
    reason = refund_mismatch(sale_return, order, merchant_id, refund, txn)
    if reason is None and refund.get("status") != REFUND_OUTCOMES[payload.get("event")]:
        reason = U.STATUS_MISMATCH
    if reason is None and sale_return.status != SaleReturn.Status.PENDING:
        if sale_return.status == refund["status"]:
            return "ignored"  # its outcome, already applied from payment's answer or the sweep
        reason = U.CONFLICTING_OUTCOME
    if reason is not None:
        return _record_unmatched_refund(**unmatched, reason=reason, sale_return=sale_return)
    return return_outcome(order, sale_return, refund)


def webhook_apply(*, merchant_id: int, message_id: str, payload: dict) -> str:
    """Act on one verified payment event once per `webhook-id`; returns what happened. An event
    names its order by the transaction id the order's placing got back, for this merchant: a
    reference alone (a `sourceId` anyone of the merchant can put on a transaction) names nothing.
    A refund's outcome also names its return by the refund id payment answered for it."""
    event = payload.get("event")
    txn = payload.get("transaction") if isinstance(payload.get("transaction"), dict) else {}
    attempt = payload.get("attempt") if isinstance(payload.get("attempt"), dict) else {}
    about = txn or {**attempt, "id": attempt.get("transactionId")}
    transaction_id = id_of(about.get("id"))
    expire = False
    with transaction.atomic(using=DB):
        try:
            with transaction.atomic(using=DB):
                PaymentWebhookReceipt.objects.create(message_id=message_id[:255], event_type=str(event)[:64])
        except IntegrityError:
            return "duplicate"
        if event in REFUND_OUTCOMES:
            return _apply_refund(merchant_id=merchant_id, message_id=message_id, payload=payload)
        order = (
            SaleOrder.objects.select_for_update().filter(merchant_id=merchant_id, payment_transaction_id=transaction_id).first()
            if transaction_id is not None
            else None
        )
        if order is not None:
            PaymentWebhookReceipt.objects.filter(pk=message_id[:255]).update(order_id=order.id)
        if event == "transaction.settled":
            reason = settlement_mismatch(order, merchant_id, txn)
            if reason == UnmatchedSettlement.Reason.NOT_AWAITING_PAYMENT and order.status in (S.PAID, S.FULFILLED):
                return "ignored"  # its own settlement, told again
            if reason is not None:
                _record_unmatched(merchant_id=merchant_id, message_id=message_id, reason=reason, txn=txn, payload=payload, order=order)
                return "unmatched"
            mark_paid(order, txn)
            return "paid"
        if order is None or str(about.get("merchantId")) != str(merchant_id) or about.get("sourceId") != order.placement_reference:
            log.info("commerce.webhook.no_order", merchantId=str(merchant_id), eventType=event, transactionId=str(about.get("id"))[:64])
            return "ignored"
        if event == "transaction.cancelled":
            if order.status == S.PLACED:
                close_order(order, S.CANCELLED, "PAYMENT_CANCELLED")
                transaction.on_commit(lambda: release_reservation(order.id), using=DB)
                return "cancelled"
            return "ignored"
        expire = event == "attempt.expired" and order.status == S.PLACED
    if expire:
        return "expired" if order_expire_if_unpaid(order_id=order.id) else "ignored"
    return "ignored"
