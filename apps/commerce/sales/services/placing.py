"""Placing a sale order. Placing is one logical transaction over three services, as a saga with compensations:

    quote tax (no side effect) -> reserve stock -> open the payment transaction -> commit PLACED

A refusal (409) or a sibling that does not answer (503) undoes what was done (the reservation is
released; a payment transaction that may exist is cancelled) and leaves the order DRAFT. Every step
is idempotent by the placement's reference (the order id, at inventory `orderId` and at payment
`sourceId`), so a retry after a crash finds the earlier effects instead of repeating them; once a
try was undone, the next one takes a fresh reference (`<id>-<n>`), since inventory and payment keep a
reference's history forever.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from apps.commerce.sales import clients
from apps.commerce.sales.clients import Refused, Unavailable
from apps.commerce.sales.models import SaleOrder, SaleOrderLine
from apps.commerce.sales.services.records import DB, RESERVATION_MARGIN_SECONDS, S, changed, illegal, invalid_answer, locked, unavailable
from apps.commerce.sales.services.settlement import id_of
from apps.commerce.sales.services.subscriptions import subscription_ensure
from apps.commerce.services import amount_too_large
from merchant_platform.errors import ApiError, Conflict
from merchant_platform.logging import get_logger
from merchant_platform.money import MAX_AMOUNT

log = get_logger(__name__)


class _StaleReference(Exception):
    """Inventory or payment holds a closed history under this placement's reference."""


@contextlib.contextmanager
def _placing(order_id: int):
    """One placing of an order at a time (across processes): a session advisory lock, held while
    the saga talks to the other services (no database transaction stays open meanwhile). Keyed on
    the whole 64-bit id: two orders made by one worker with one sequence number 2^9 ms apart share
    their low 31 bits (a false ORDER_BUSY, seen by `scripts/bench soak`). The one-bigint key space
    does not overlap the two-integer one the other advisory locks use, and a snowflake id names one
    row of the whole platform."""
    with connections[DB].cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [order_id])
        if not cursor.fetchone()[0]:
            raise Conflict("This order is being placed by another request.", code="ORDER_BUSY")
    try:
        yield
    finally:
        with connections[DB].cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [order_id])


def _begin(order_id: int, *, fresh: bool = False) -> SaleOrder:
    """The order with the reference this try uses: a new one on the first try and after an undone
    one (or when the last one turned out stale), else the last one (a retry after a crash)."""
    with transaction.atomic(using=DB):
        order = locked(order_id)
        if order.status != S.DRAFT:
            return order
        if fresh or not order.placement_reference or order.placement_undone:
            order.placement_attempt += 1
            order.placement_reference = str(order.id) if order.placement_attempt == 1 else f"{order.id}-{order.placement_attempt}"
            order.placement_undone = False
            order.save(update_fields=["placement_attempt", "placement_reference", "placement_undone", "updated_at"])
    return order


def order_place(*, order_id: int) -> SaleOrder:
    """DRAFT -> PLACED (see the module's docstring). An order already placed (or further) is
    answered as it is: placing twice is harmless."""
    with _placing(order_id):
        order = _begin(order_id)
        if order.status == S.DRAFT:
            # A stale reference (siblings hold another placing under it): once more with a fresh one.
            with contextlib.suppress(_StaleReference):
                return _place(order)
            try:
                return _place(_begin(order_id, fresh=True))
            except _StaleReference:
                raise Conflict(
                    "Inventory or payment hold another placing under this order's reference again; nothing is held. Try again.",
                    code="PLACEMENT_CONFLICT",
                ) from None
        if order.status in (S.PLACED, S.PAID, S.FULFILLED):
            return order
        raise illegal(order, "placed")


def _place(order: SaleOrder) -> SaleOrder:
    lines = list(order.lines.all())
    try:
        quote, net, tax, gross = _totals(order, lines)
    except ApiError:
        _retire(order)  # nothing is held yet
        raise
    reservations = _reserve(order, lines)
    if not _reserved_as_asked(order, lines, reservations):
        _undo(order)
        raise _StaleReference
    txn = _open_payment(order, lines, gross, tax)
    if not _opened_as_asked(order, lines, gross, tax, txn):
        # Under this order's reference, yet not this content (a transaction opened by hand, or by
        # an earlier try of other lines): it is cancelled, and a fresh reference opens the order's own.
        log.error(
            "commerce.order.foreign_transaction", orderId=str(order.id), reference=order.placement_reference, transactionId=str(txn["id"])
        )
        _undo(order, transaction_id=int(txn["id"]))
        raise _StaleReference
    if txn.get("status") == "CANCELLED":
        _undo(order)
        raise _StaleReference
    try:
        with transaction.atomic(using=DB):
            current = locked(order.id)
            if current.status != S.DRAFT or current.placement_reference != order.placement_reference:
                return current
            now = timezone.now()
            SaleOrderLine.objects.bulk_update(lines, ["net_amount", "tax_amount", "gross_amount"])
            current.net_amount = net
            current.tax_amount = tax
            current.gross_amount = gross
            current.tax_quote = quote
            current.payment_transaction_id = int(txn["id"])
            current.payment = txn
            current.status = S.PLACED
            current.placed_at = now
            current.expires_at = now + timedelta(seconds=settings.COMMERCE_ORDER_PAYMENT_WINDOW_SECONDS)
            current.save()
            changed(current, "order.placed")
    except DatabaseError:
        # Most likely the database went away: undo at the siblings; what is left here (the
        # reference) makes the retry start afresh.
        log.error("commerce.order.place_commit_failed", orderId=str(order.id), reference=order.placement_reference)
        _undo(order, transaction_id=int(txn["id"]))
        raise
    log.info("commerce.order.placed", orderId=str(order.id), reference=order.placement_reference, transactionId=str(txn["id"]))
    return current


def _totals(order: SaleOrder, lines: list[SaleOrderLine]) -> tuple[dict | None, int, int, int]:
    """Taxation's quote and the order's net, tax and gross, each line's set on it. The order's totals
    are the sums of its lines' totals as taxation computed them: an inclusive tax is inside the
    price (the net below it), an exclusive one on top; an untaxed line's gross is its price."""
    taxed, quote = _quote(order, lines)
    for line in lines:
        line.net_amount, line.tax_amount, line.gross_amount = taxed.get(line.line_number, (line.net_amount, 0, line.net_amount))
    gross = sum(line.gross_amount for line in lines)
    if gross > MAX_AMOUNT:
        raise amount_too_large("lines", "The order's total with tax")
    if gross <= 0:
        raise Conflict("The order's total is zero: there is nothing to pay.", code="NOTHING_TO_PAY")
    return quote, sum(line.net_amount for line in lines), sum(line.tax_amount for line in lines), gross


def _quote(order: SaleOrder, lines: list[SaleOrderLine]) -> tuple[dict[int, tuple[int, int, int]], dict | None]:
    """Each taxed line's (net, tax, gross) by line number, as taxation computed it, and the whole
    quote. Lines of a product without a tax group carry no tax and are not sent."""
    taxed = [line for line in lines if line.tax_group_id is not None]
    if not taxed:
        return {}, None
    body = [{"productId": str(line.product_id), "quantity": str(line.quantity), "unitPrice": line.unit_price_amount} for line in taxed]
    try:
        quote = clients.quote(merchant_id=order.merchant_id, currency=order.currency, lines=body)
    except Unavailable as exc:
        raise unavailable(exc) from None
    except Refused as exc:
        raise Conflict(
            "Taxation cannot quote this order (a product's tax is not set up).", code="TAX_NOT_AVAILABLE", extra={"taxation": exc.body}
        ) from None
    return {line.line_number: totals for line, totals in _quoted_lines(order, taxed, quote)}, quote


def _quoted_lines(order: SaleOrder, taxed: list[SaleOrderLine], quote) -> list[tuple[SaleOrderLine, tuple[int, int, int]]]:
    """Taxation's answer checked against what was asked: this merchant and currency, the same lines
    in the same order (product, quantity, unit price), whole non-negative amounts with net + tax =
    gross, each line's gross within MAX_AMOUNT."""
    if not isinstance(quote, dict) or quote.get("merchantId") != str(order.merchant_id) or quote.get("currency") != order.currency:
        raise invalid_answer("taxation", order, "another merchant or currency")
    answered = quote.get("lines")
    if not isinstance(answered, list) or len(answered) != len(taxed):
        raise invalid_answer("taxation", order, "another number of lines")
    checked = []
    for line, q in zip(taxed, answered, strict=True):
        amounts = [q.get(name) if isinstance(q, dict) else None for name in ("net", "tax", "gross", "unitPrice")]
        if (
            not all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in amounts)
            or q.get("productId") != str(line.product_id)
            or _decimal(q.get("quantity")) != line.quantity
            or q["unitPrice"] != line.unit_price_amount
            or q["net"] + q["tax"] != q["gross"]
        ):
            raise invalid_answer("taxation", order, f"line {line.line_number} is not the line asked for")
        if q["gross"] > MAX_AMOUNT:
            raise amount_too_large(f"lines[{line.line_number - 1}]", f"Line {line.line_number}'s total with tax")
        checked.append((line, (q["net"], q["tax"], q["gross"])))
    return checked


def _decimal(value) -> Decimal | None:
    try:
        return Decimal(str(value)) if isinstance(value, str | int) and not isinstance(value, bool) else None
    except InvalidOperation:
        return None


def _retire(order: SaleOrder) -> None:
    """A try refused before anything was held: its reference is done with, so a later try (of
    other lines, maybe) never meets a transaction someone put under it meanwhile."""
    SaleOrder.objects.filter(pk=order.id, placement_reference=order.placement_reference).update(
        placement_undone=True, updated_at=timezone.now()
    )


def _reserved_as_asked(order: SaleOrder, lines: list[SaleOrderLine], reservations) -> bool:
    """Inventory's answer checked: every reservation this merchant's, under this reference, ACTIVE,
    and the quantities by line those asked for. Another merchant or reference is a bad answer
    (502, after releasing); other lines or quantities (a try of earlier lines left under this
    reference) or a released reservation make the placing start afresh (False)."""
    if not isinstance(reservations, list) or not all(isinstance(r, dict) for r in reservations):
        _undo(order)
        raise invalid_answer("inventory", order, "not a list of reservations")
    if any(r.get("merchantId") != str(order.merchant_id) or r.get("orderId") != order.placement_reference for r in reservations):
        _undo(order)
        raise invalid_answer("inventory", order, "another merchant or reference")
    held: dict[str, int] = {}
    for r in reservations:
        quantity = r.get("quantity")
        held[str(r.get("lineId"))] = held.get(str(r.get("lineId")), 0) + (quantity if isinstance(quantity, int) else -1)
    asked = {str(line.line_number): line.quantity for line in lines}
    return held == asked and all(r.get("status") == "ACTIVE" for r in reservations)


def _reserve(order: SaleOrder, lines: list[SaleOrderLine]) -> list[dict]:
    body = [{"lineId": str(line.line_number), "variantId": str(line.variant_id), "quantity": line.quantity} for line in lines]
    ttl = settings.COMMERCE_ORDER_PAYMENT_WINDOW_SECONDS + RESERVATION_MARGIN_SECONDS
    try:
        return clients.reserve(reference=order.placement_reference, merchant_id=order.merchant_id, lines=body, ttl_seconds=ttl)
    except Unavailable as exc:
        _undo(order)  # a timeout may have reserved
        raise unavailable(exc) from None
    except Refused as exc:
        _retire(order)  # all or nothing: inventory holds nothing of a refused reservation
        if exc.status == 404:
            raise Conflict(
                "Inventory does not stock a variant of this order yet.",
                code="ITEM_NOT_STOCKED",
                extra={"variantIds": exc.body.get("variantIds", [])},
            ) from None
        extra = {key: value for key, value in exc.body.items() if key not in {"type", "title", "status", "detail", "code", "instance"}}
        raise Conflict(exc.body.get("detail") or "Inventory refused the reservation.", code=exc.code, extra=extra) from None


def _payment_lines(lines: list[SaleOrderLine]) -> list[dict]:
    return [{"lineId": str(line.line_number), "variantId": str(line.variant_id), "quantity": line.quantity} for line in lines]


def _opened_as_asked(order: SaleOrder, lines: list[SaleOrderLine], gross: int, tax: int, txn) -> bool:
    """Payment's answer checked: a transaction of this merchant under this reference (else a bad
    answer, 502, after releasing the stock), and for this content: the gross, the tax it includes,
    the currency, the finance account and the lines (else False)."""
    if not isinstance(txn, dict) or id_of(txn.get("id")) is None:
        _undo(order, find_transaction=True)
        raise invalid_answer("payment", order, "no transaction id")
    if txn.get("merchantId") != str(order.merchant_id) or txn.get("sourceId") != order.placement_reference:
        _undo(order)  # not this merchant's or reference's: not ours to cancel
        raise invalid_answer("payment", order, "another merchant or reference")
    finance_account = None if order.finance_account_id is None else str(order.finance_account_id)
    answered_lines = [
        {key: line.get(key) for key in ("lineId", "variantId", "quantity")} for line in txn.get("lines") or [] if isinstance(line, dict)
    ]
    return (
        txn.get("amount") == gross
        and not isinstance(txn.get("amount"), bool)
        and txn.get("taxAmount") == tax
        and not isinstance(txn.get("taxAmount"), bool)
        and txn.get("currency") == order.currency
        and txn.get("financeAccountId") == finance_account
        and answered_lines == _payment_lines(lines)
    )


def _open_payment(order: SaleOrder, lines: list[SaleOrderLine], gross: int, tax: int) -> dict:
    body = {
        "merchantId": str(order.merchant_id),
        "sourceId": order.placement_reference,
        "amount": gross,
        # The tax inside the gross: finance credits it to tax payable and the rest to revenue.
        "taxAmount": tax,
        "currency": order.currency,
        "channel": order.payment_channel,
        "financeAccountId": None if order.finance_account_id is None else str(order.finance_account_id),
        "lines": _payment_lines(lines),
        "description": f"Sale order {order.id}",
    }
    try:
        subscription_ensure(merchant_id=order.merchant_id)
        return clients.open_transaction(body)
    except Unavailable as exc:
        _undo(order, find_transaction=True)  # a timeout may have opened it
        raise unavailable(exc) from None
    except Refused as exc:
        _undo(order)
        raise Conflict(
            exc.body.get("detail") or "Payment refused the transaction.", code=exc.code or "PAYMENT_REFUSED", extra={"payment": exc.body}
        ) from None


def _undo(order: SaleOrder, *, transaction_id: int | None = None, find_transaction: bool = False) -> None:
    """Compensate a failed try: cancel its payment transaction (given, or looked up by the
    reference) and release its reservation, each independently. When both are done, the next try
    takes a fresh reference; when a sibling does not answer, the next try reuses this one and finds
    what is left (a released reservation or a cancelled transaction make it start afresh)."""
    undone = True
    try:
        if find_transaction:
            found = clients.transactions_of(merchant_id=order.merchant_id, source_id=order.placement_reference)
            transaction_id = int(found[0]["id"]) if found else None
        if transaction_id is not None:
            with contextlib.suppress(Refused):  # already cancelled (or final): nothing to undo there
                clients.cancel_transaction(transaction_id=transaction_id)
    except (Unavailable, Refused) as exc:
        undone = False
        log.warning(
            "commerce.order.undo_incomplete", orderId=str(order.id), reference=order.placement_reference, step="payment", error=str(exc)
        )
    try:
        clients.release(reference=order.placement_reference)
    except (Unavailable, Refused) as exc:
        undone = False
        log.warning(
            "commerce.order.undo_incomplete", orderId=str(order.id), reference=order.placement_reference, step="inventory", error=str(exc)
        )
    if undone:
        SaleOrder.objects.filter(pk=order.id, placement_reference=order.placement_reference).update(
            placement_undone=True, updated_at=timezone.now()
        )


# --- Payment webhooks in --------------------------------------------------------------------------
