"""Cancelling, fulfilling and expiring sale orders (an unpaid PLACED order that closes releases its
stock and cancels its payment)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.commerce.sales import clients
from apps.commerce.sales.clients import Refused, Unavailable
from apps.commerce.sales.models import SaleOrder
from apps.commerce.sales.services.records import DB, FINAL_ATTEMPT_STATES, S, changed, illegal, locked, unavailable
from apps.commerce.sales.services.settlement import close_order, mark_paid, paid_by, release_reservation
from merchant_platform.errors import ApiError, NotFound
from merchant_platform.logging import get_logger

log = get_logger(__name__)


def _close_unpaid(order_id: int, status: str, reason: str) -> SaleOrder:
    """PLACED -> CANCELLED or EXPIRED: payment's transaction is cancelled first (so it can no longer
    be paid); when payment says it settled meanwhile, the order is PAID instead."""
    order = SaleOrder.objects.filter(pk=order_id).first()
    if order is None:
        raise NotFound("No sale order has this id.")
    settled = None
    if order.status == S.PLACED and order.payment_transaction_id is not None:
        try:
            clients.cancel_transaction(transaction_id=order.payment_transaction_id)
        except Unavailable as exc:
            raise unavailable(exc) from None
        except Refused:
            try:
                txn = clients.transaction(transaction_id=order.payment_transaction_id)
            except (Unavailable, Refused) as exc:
                raise unavailable(exc if isinstance(exc, Unavailable) else Unavailable("payment", exc.code)) from None
            settled = txn if txn.get("status") == "SETTLED" else None
    with transaction.atomic(using=DB):
        order = locked(order_id)
        if order.status != S.PLACED:
            return order
        if settled is not None and paid_by(order, settled):
            mark_paid(order, settled)
            return order
        close_order(order, status, reason)
    release_reservation(order.id)
    return order


def order_cancel(*, order_id: int) -> SaleOrder:
    """DRAFT or PLACED -> CANCELLED (a placed order's payment is cancelled and its stock released);
    a paid order cannot be cancelled (409): it is refunded (refunds.py)."""
    with transaction.atomic(using=DB):
        order = locked(order_id)
        if order.status == S.DRAFT:
            close_order(order, S.CANCELLED, "CANCELLED")
            return order
        if order.status != S.PLACED:
            raise illegal(order, "cancelled")
    order = _close_unpaid(order_id, S.CANCELLED, "CANCELLED")
    if order.status != S.CANCELLED:
        raise illegal(order, "cancelled")
    return order


def order_fulfill(*, order_id: int) -> SaleOrder:
    """PAID -> FULFILLED. A PARTIALLY_REFUNDED order not yet handed over stays PARTIALLY_REFUNDED (its
    status tells the money, as after a refund of a FULFILLED order) and gets its `fulfilled_at`."""
    with transaction.atomic(using=DB):
        order = locked(order_id)
        if order.status == S.PAID:
            order.status = S.FULFILLED
        elif order.status != S.PARTIALLY_REFUNDED or order.fulfilled_at is not None:
            raise illegal(order, "fulfilled")
        order.fulfilled_at = timezone.now()
        order.save()
        changed(order, "order.fulfilled")
    return order


def order_expire_if_unpaid(*, order_id: int) -> bool:
    """EXPIRED when every attempt of the order's transaction ended without paying (a new attempt
    may still be open: then nothing changes). Returns whether it expired."""
    order = SaleOrder.objects.filter(pk=order_id).first()
    if order is None or order.status != S.PLACED or order.payment_transaction_id is None:
        return False
    try:
        txn = clients.transaction(transaction_id=order.payment_transaction_id)
    except (Unavailable, Refused) as exc:
        log.warning("commerce.order.expiry_check_failed", orderId=str(order.id), error=str(exc))
        return False
    attempts = txn.get("attempts") or []
    if txn.get("status") == "NEW" and attempts and all(a.get("status") in FINAL_ATTEMPT_STATES for a in attempts):
        return _close_unpaid(order.id, S.EXPIRED, "PAYMENT_EXPIRED").status == S.EXPIRED
    if txn.get("status") == "SETTLED":
        with transaction.atomic(using=DB):
            current = locked(order.id)
            if current.status == S.PLACED and paid_by(current, txn):
                mark_paid(current, txn)
    return False


def orders_expire_due(*, limit: int = 200) -> int:
    """The beat task's work: PLACED orders past their payment window expire (unless payment says
    they were paid), and closed orders whose reservation release did not go through are retried."""
    expired = 0
    due = SaleOrder.objects.filter(status=S.PLACED, expires_at__lte=timezone.now()).order_by("expires_at").values_list("id", flat=True)
    for order_id in list(due[:limit]):
        try:
            if _close_unpaid(order_id, S.EXPIRED, "UNPAID_IN_TIME").status == S.EXPIRED:
                expired += 1
        except ApiError as exc:
            log.warning("commerce.order.expiry_deferred", orderId=str(order_id), code=exc.get_codes())
    pending = SaleOrder.objects.filter(
        status__in=(S.CANCELLED, S.EXPIRED), placed_at__isnull=False, reservation_released_at__isnull=True
    ).values_list("id", flat=True)
    for order_id in list(pending[:limit]):
        release_reservation(order_id)
    return expired
