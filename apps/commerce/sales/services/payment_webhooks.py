"""Payment webhooks in: the merchant's subscription at payment, signature checks, and settlements
applied to the orders they pay (or recorded as unmatched)."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.commerce.models import Merchant
from apps.commerce.sales import clients
from apps.commerce.sales.models import PaymentSubscription, PaymentWebhookReceipt, SaleOrder, UnmatchedSettlement
from apps.commerce.sales.services.closing import order_expire_if_unpaid
from apps.commerce.sales.services.records import DB, SECRET_PURPOSE, S
from apps.commerce.sales.services.settlement import close_order, id_of, mark_paid, release_reservation, settlement_mismatch
from merchant_platform import crypto
from merchant_platform.errors import ApiError, InvalidInput, NotFound
from merchant_platform.logging import get_logger

log = get_logger(__name__)


def subscription_ensure(*, merchant_id: int) -> PaymentSubscription:
    """Commerce's webhook config at payment for the merchant, made on its first placing. The
    merchant's row is locked meanwhile, so two placings never subscribe twice."""
    existing = PaymentSubscription.objects.filter(merchant_id=merchant_id).first()
    if existing is not None:
        return existing
    with transaction.atomic(using=DB):
        Merchant.objects.select_for_update().filter(pk=merchant_id).first()
        existing = PaymentSubscription.objects.filter(merchant_id=merchant_id).first()
        if existing is not None:
            return existing
        answer = clients.subscribe(merchant_id=merchant_id, url=f"{settings.COMMERCE_PAYMENT_WEBHOOK_URL}/{merchant_id}")
        sealed = crypto.encrypt(answer["secret"], purpose=SECRET_PURPOSE, associated_data=str(merchant_id).encode())
        return PaymentSubscription.objects.create(merchant_id=merchant_id, webhook_id=int(answer["id"]), sealed_secret=sealed)


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


def _record_unmatched(*, merchant_id: int, message_id: str, reason: str, txn: dict, payload: dict, order: SaleOrder | None) -> None:
    """Inside the webhook's transaction: the settlement kept for reconciliation, and an error log."""
    UnmatchedSettlement.objects.create(
        message_id=message_id[:255],
        merchant_id=merchant_id,
        reason=reason,
        transaction_id=str(txn.get("id") or "")[:64],
        source_id=str(txn.get("sourceId") or "")[:255],
        amount=str(txn.get("amount") if txn.get("amount") is not None else "")[:64],
        currency=str(txn.get("currency") or "")[:16],
        order_id=None if order is None else order.id,
        payload=payload,
    )
    log.error(
        "commerce.settlement.unmatched",
        merchantId=str(merchant_id),
        reason=reason,
        transactionId=str(txn.get("id") or "")[:64],
        reference=str(txn.get("sourceId") or "")[:255],
        orderId=None if order is None else str(order.id),
    )


def webhook_apply(*, merchant_id: int, message_id: str, payload: dict) -> str:
    """Act on one verified payment event once per `webhook-id`; returns what happened. An event
    names its order by the transaction id the order's placing got back, for this merchant: a
    reference alone (a `sourceId` anyone of the merchant can put on a transaction) names nothing."""
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
