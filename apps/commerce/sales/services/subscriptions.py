"""Commerce's webhook subscription at payment, one per merchant: made on the merchant's first
placing, changed to ask for the refund events when a refund first needs them."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from apps.commerce.models import Merchant
from apps.commerce.sales import clients
from apps.commerce.sales.clients import Refused, Unavailable
from apps.commerce.sales.models import PaymentSubscription
from apps.commerce.sales.services.records import DB, SECRET_PURPOSE
from merchant_platform import crypto
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
        return PaymentSubscription.objects.create(
            merchant_id=merchant_id, webhook_id=int(answer["id"]), sealed_secret=sealed, event_types=list(clients.EVENT_TYPES)
        )


def subscription_follow_refunds(*, merchant_id: int) -> None:
    """Commerce's subscription at payment asks for the refund events: a subscription made before
    refunds is changed at payment (PATCH) the first time a refund needs it. A failure is logged and
    tried again at the next refund: the outcome is still read from payment's answer or by the sweep."""
    try:
        subscription = subscription_ensure(merchant_id=merchant_id)
        if set(clients.EVENT_TYPES) <= set(subscription.event_types):
            return
        with transaction.atomic(using=DB):
            subscription = PaymentSubscription.objects.select_for_update().get(pk=merchant_id)
            if set(clients.EVENT_TYPES) <= set(subscription.event_types):
                return
            answer = clients.resubscribe(webhook_id=subscription.webhook_id)
            asked = answer.get("eventTypes") if isinstance(answer, dict) else None
            if not isinstance(asked, list) or not set(clients.EVENT_TYPES) <= set(asked):
                log.error("commerce.subscription.update_not_applied", merchantId=str(merchant_id), webhookId=str(subscription.webhook_id))
                return
            subscription.event_types = list(clients.EVENT_TYPES)
            subscription.save(update_fields=["event_types"])
            log.info("commerce.subscription.updated", merchantId=str(merchant_id), webhookId=str(subscription.webhook_id))
    except (Unavailable, Refused) as exc:
        log.error("commerce.subscription.update_failed", merchantId=str(merchant_id), error=str(exc))
