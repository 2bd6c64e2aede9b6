"""What the writes of sale orders share: errors of sibling calls, locking an order, and what follows a
change (the summary, the merchant's room)."""

from __future__ import annotations

from apps.commerce.sales.clients import Unavailable
from apps.commerce.sales.models import SaleOrder
from apps.commerce.services import summary_changed
from merchant_platform import realtime
from merchant_platform.errors import ApiError, Conflict, NotFound
from merchant_platform.logging import get_logger

log = get_logger(__name__)


DB = "commerce"
S = SaleOrder.Status
CHANNELS = ("QR", "PHONE_POS", "SMART_POS", "SYSTEM")
SECRET_PURPOSE = "payment-webhook-secret"
RESERVATION_MARGIN_SECONDS = 600  # inventory holds the stock this long after the order would expire
FINAL_ATTEMPT_STATES = ("FAILED", "EXPIRED", "CANCELLED")


def room(merchant_id: int) -> str:
    return f"merchant.{merchant_id}.commerce"


def unavailable(error: Unavailable) -> ApiError:
    return ApiError(
        f"The {error.service} service did not answer; nothing was kept. Try again.",
        code=f"{error.service.upper()}_UNAVAILABLE",
        status_code=503,
    )


def invalid_answer(service: str, order: SaleOrder, reason: str) -> ApiError:
    """A sibling answered something that is not about this order (another merchant, reference,
    line or amount): nothing of it is kept, and the operator learns of it from the error log."""
    log.error("commerce.order.sibling_answer_invalid", service=service, orderId=str(order.id), reason=reason)
    return ApiError(
        f"The {service} service answered for something else than this order ({reason}); nothing was kept.",
        code=f"{service.upper()}_ANSWER_INVALID",
        status_code=502,
    )


def illegal(order: SaleOrder, action: str) -> Conflict:
    return Conflict(f"A {order.status} order cannot be {action}.", code="ILLEGAL_TRANSITION", extra={"status": order.status})


def locked(order_id: int) -> SaleOrder:
    order = SaleOrder.objects.select_for_update().filter(pk=order_id).first()
    if order is None:
        raise NotFound("No sale order has this id.")
    return order


def changed(order: SaleOrder, event: str | None = None, *, extra: dict | None = None) -> None:
    """Inside the order's transaction: the footer summary and, for a move, the merchant's room
    (`extra`: what the move adds to the payload, e.g. a refund's amounts)."""
    merchant_id = order.merchant_id
    summary_changed(merchant_id)
    if event is not None:
        payload = {
            "orderId": str(order.id),
            "status": order.status,
            "grossAmount": order.gross_amount,
            "currency": order.currency,
            "closingReason": order.closing_reason,
            **(extra or {}),
        }
        realtime.broadcast(room(merchant_id), event, payload, using=DB)


# --- Creation and edits of drafts -----------------------------------------------------------------
