"""Settlements matched to their orders, and the moves they make: an order marked paid, closed unpaid
(its payment cancelled), its reservation released. Shared by payment webhooks and expiry.
"""

from __future__ import annotations

from django.utils import timezone

from apps.commerce.sales import clients
from apps.commerce.sales.clients import Refused, Unavailable
from apps.commerce.sales.models import SaleOrder, UnmatchedSettlement
from apps.commerce.sales.services.records import S, changed
from merchant_platform.logging import get_logger

log = get_logger(__name__)


def id_of(value) -> int | None:
    """A snowflake id as payment writes it (a decimal string), else None."""
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    return int(text) if text.isdecimal() and len(text) <= 19 and int(text) < 2**63 else None


def settlement_mismatch(order: SaleOrder | None, merchant_id: int, txn: dict) -> str | None:
    """Why `txn`, said settled, does not pay `order` (the order this merchant placed with that
    transaction id), or None when it does. PAID and FULFILLED orders are checked by the caller."""
    R = UnmatchedSettlement.Reason
    if order is None:
        return R.UNKNOWN_TRANSACTION
    if str(txn.get("merchantId")) != str(merchant_id):
        return R.OTHER_MERCHANT
    if txn.get("sourceId") != order.placement_reference:
        return R.OTHER_REFERENCE
    if txn.get("status") != "SETTLED":
        return R.NOT_SETTLED
    if txn.get("currency") != order.currency:
        return R.CURRENCY_MISMATCH
    if txn.get("amount") != order.gross_amount or isinstance(txn.get("amount"), bool):
        return R.AMOUNT_MISMATCH
    if order.status != S.PLACED:
        return R.NOT_AWAITING_PAYMENT
    return None


def mark_paid(order: SaleOrder, txn: dict) -> None:
    """Inside a transaction holding the PLACED order: its own transaction settled (checked by the
    caller with `settlement_mismatch`)."""
    order.status = S.PAID
    order.paid_at = timezone.now()
    order.payment = txn
    order.save()
    changed(order, "order.paid")
    log.info("commerce.order.paid", orderId=str(order.id), transactionId=str(txn.get("id")))


def paid_by(order: SaleOrder, txn: dict) -> bool:
    """Whether `txn`, which payment answered for the order's transaction id, settles this order;
    a mismatch is logged at error level for reconciliation."""
    reason = (
        settlement_mismatch(order, order.merchant_id, txn) if id_of(txn.get("id")) == order.payment_transaction_id else "OTHER_TRANSACTION"
    )
    if reason is not None:
        log.error("commerce.settlement.unmatched", merchantId=str(order.merchant_id), reason=reason, orderId=str(order.id))
    return reason is None


def close_order(order: SaleOrder, status: str, reason: str) -> None:
    order.status = status
    order.closing_reason = reason
    if status == S.CANCELLED:
        order.cancelled_at = timezone.now()
    else:
        order.expired_at = timezone.now()
    order.save()
    changed(order, f"order.{status.lower()}")


def release_reservation(order_id: int) -> bool:
    """Release a closed order's reservation at inventory; the sweep retries until it answered."""
    order = SaleOrder.objects.filter(pk=order_id).first()
    if order is None or not order.placement_reference or order.reservation_released_at is not None:
        return True
    try:
        clients.release(reference=order.placement_reference)
    except (Unavailable, Refused) as exc:
        log.warning("commerce.order.release_failed", orderId=str(order.id), error=str(exc))
        return False
    SaleOrder.objects.filter(pk=order.id).update(reservation_released_at=timezone.now())
    return True


# --- Cancelling, fulfilling, expiring -------------------------------------------------------------
