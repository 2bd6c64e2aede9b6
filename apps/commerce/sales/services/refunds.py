"""Refunds of paid sale orders (issue 33): a return recorded under the order's lock (its lines, the
quantities still refundable, the amounts from the order's own lines), then asked of payment once
committed (Idempotency-Key: the return's id), and its outcome applied from payment's answer, its
webhooks (payment_webhooks.py) or the sweep that resumes what neither finished."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from apps.commerce.sales import clients
from apps.commerce.sales.clients import Refused, Unavailable
from apps.commerce.sales.models import SaleOrder, SaleOrderLine, SaleReturn, SaleReturnLine, UnmatchedRefund
from apps.commerce.sales.services.records import DB, S, changed, illegal, locked
from apps.commerce.sales.services.settlement import id_of
from apps.commerce.sales.services.subscriptions import subscription_follow_refunds
from merchant_platform import references
from merchant_platform.errors import ApiError, Conflict, InvalidInput
from merchant_platform.logging import get_logger

log = get_logger(__name__)

R = SaleReturn.Status
RETURNABLE = (S.PAID, S.FULFILLED, S.PARTIALLY_REFUNDED)
# Payment's answers that say "not now" rather than "no": the return stays PENDING and is asked again.
NOT_NOW = ("IDEMPOTENCY_KEY_IN_PROGRESS", "IDEMPOTENCY_KEY_REUSED")
# The sweep leaves a return this long to the request that recorded it before asking payment itself.
RESUME_AFTER_SECONDS = 60


def cumulative_share(amount: int, quantity: int, units: int) -> int:
    """round_half_even(amount * units / quantity) in integers: the part of a line's `amount` that
    `units` of its `quantity` carry. Refunding all units gives `amount` exactly."""
    whole, rest = divmod(amount * units, quantity)
    if 2 * rest > quantity or (2 * rest == quantity and whole % 2 == 1):
        whole += 1
    return whole


def line_refund(line: SaleOrderLine, *, units_after: int, gross_before: int, tax_before: int) -> tuple[int, int, int]:
    """(net, tax, gross) a return gives back for a line whose live returns (not FAILED) will hold
    `units_after` units once it is recorded, and already gave back `gross_before` and `tax_before`:
    the cumulative rounding of the line's gross and tax at `units_after`, less what was given. So
    the refunds of a line always add up to its rounded share, and refunding every unit gives back
    exactly its gross and its tax. The tax part never exceeds the gross part (a tax rounded up where
    the gross rounded down waits for the line's next return), so no net is negative."""
    gross = max(cumulative_share(line.gross_amount, line.quantity, units_after) - gross_before, 0)
    tax = min(max(cumulative_share(line.tax_amount or 0, line.quantity, units_after) - tax_before, 0), gross)
    return gross - tax, tax, gross


def _refunded_so_far(order_id: int) -> dict[int, dict]:
    """Per order line: the units, gross and tax of its returns that did not fail (PENDING ones hold
    their units: a concurrent refund cannot take them)."""
    rows = (
        SaleReturnLine.objects.filter(order_line__order_id=order_id)
        .exclude(sale_return__status=R.FAILED)
        .values("order_line_id")
        .annotate(units=Sum("quantity"), gross=Sum("gross_amount"), tax=Sum("tax_amount"))
        .order_by()
    )
    return {row["order_line_id"]: row for row in rows}


def _line_error(code: str, field: str, message: str, *, status_code: int = 400, **extra) -> ApiError:
    return ApiError(
        message,
        code=code,
        status_code=status_code,
        extra={"field": field, **extra, "errors": [{"field": field, "code": code, "message": message}]},
    )


def refund_locations_check(merchant_id: int, lines: list[dict]) -> None:
    """The locations a refund names for restocked goods are the merchant's own: inventory, which
    owns them, answers (400 naming `lines[i].locationId`; 503 when it cannot answer). Called by the
    view before the write, like finance_account_check."""
    for index, line in enumerate(lines):
        if line.get("location_id") is not None:
            references.check_owned(
                field=f"lines[{index}].locationId",
                url=f"{settings.COMMERCE_INVENTORY_URL}/locations/{line['location_id']}",
                merchant_id=merchant_id,
                what="inventory location",
            )


def order_refund(*, order_id: int, reason: str, lines: list[dict] | None = None, requested_by: int | None = None) -> SaleReturn:
    """Record a PENDING return of `lines` (`line_id` as the API shows it, `quantity`, `restock`,
    optional `location_id`) of a PAID, FULFILLED or PARTIALLY_REFUNDED order; without `lines`,
    everything still refundable, restocked. Payment is asked once this commits (return_submit).
    400 REFUND_LINE_UNKNOWN / REFUND_LINE_QUANTITY_EXCEEDED (more than the line sold) naming the
    line; 409 REFUND_EXCEEDS_REFUNDABLE (more than earlier returns left, or the order is REFUNDED:
    the one answer concurrent refunds that do not fit get, whatever their order), 409
    ILLEGAL_TRANSITION, 409 NOTHING_TO_REFUND."""
    with transaction.atomic(using=DB):
        order = locked(order_id)
        if order.status == S.REFUNDED:
            raise Conflict("Every unit of this order is refunded.", code="REFUND_EXCEEDS_REFUNDABLE")
        if order.status not in RETURNABLE or order.payment_transaction_id is None:
            raise illegal(order, "refunded")
        order_lines = {str(line.line_number): line for line in order.lines.all()}
        so_far = _refunded_so_far(order.id)
        if lines is None:
            lines = [
                {"line_id": number, "quantity": line.quantity - so_far.get(line.id, {}).get("units", 0), "restock": True}
                for number, line in order_lines.items()
            ]
            lines = [line for line in lines if line["quantity"] > 0]
            if not lines:
                raise Conflict("Every unit of this order is refunded or being refunded.", code="NOTHING_TO_REFUND")
        if not lines:
            raise InvalidInput({"lines": "Give at least one line."})
        seen: set[int] = set()
        refunded = []
        for index, asked in enumerate(lines):
            line = order_lines.get(str(asked["line_id"]))
            if line is None:
                raise _line_error("REFUND_LINE_UNKNOWN", f"lines[{index}].lineId", "This order has no line with this id.")
            if line.id in seen:
                raise InvalidInput({f"lines[{index}].lineId": "Each line may appear once (give its quantity)."})
            seen.add(line.id)
            before = so_far.get(line.id, {"units": 0, "gross": 0, "tax": 0})
            refundable = line.quantity - before["units"]
            if not 1 <= asked["quantity"] <= line.quantity:
                raise _line_error(
                    "REFUND_LINE_QUANTITY_EXCEEDED",
                    f"lines[{index}].quantity",
                    f"Line {line.line_number} sold {line.quantity} unit(s); {refundable} are left to refund.",
                    refundable=refundable,
                )
            if asked["quantity"] > refundable:
                raise _line_error(
                    "REFUND_EXCEEDS_REFUNDABLE",
                    f"lines[{index}].quantity",
                    f"Line {line.line_number} has {refundable} unit(s) left to refund (earlier returns took the rest).",
                    status_code=409,
                    refundable=refundable,
                )
            net, tax, gross = line_refund(
                line, units_after=before["units"] + asked["quantity"], gross_before=before["gross"], tax_before=before["tax"]
            )
            refunded.append((line, asked, net, tax, gross))
        gross_total = sum(gross for *_, gross in refunded)
        if gross_total == 0:
            raise Conflict("These units were sold for nothing: there is no money to give back.", code="NOTHING_TO_REFUND")
        sale_return = SaleReturn.objects.create(
            merchant_id=order.merchant_id,
            order=order,
            reason=reason,
            currency=order.currency,
            net_amount=sum(net for _, _, net, _, _ in refunded),
            tax_amount=sum(tax for _, _, _, tax, _ in refunded),
            gross_amount=gross_total,
            created_by=requested_by,
        )
        SaleReturnLine.objects.bulk_create(
            SaleReturnLine(
                sale_return=sale_return,
                order_line=line,
                quantity=asked["quantity"],
                restock=asked["restock"],
                location_id=asked.get("location_id"),
                net_amount=net,
                tax_amount=tax,
                gross_amount=gross,
            )
            for line, asked, net, tax, gross in refunded
        )
        log.info("commerce.return.recorded", orderId=str(order.id), returnId=str(sale_return.id), grossAmount=gross_total)
        # robust: a submission that fails for any other reason than payment's answer is the sweep's to resume.
        transaction.on_commit(lambda: return_submit(return_id=sale_return.id), using=DB, robust=True)
    return sale_return


def _payment_body(sale_return: SaleReturn) -> dict:
    order = sale_return.order
    return {
        "merchantId": str(order.merchant_id),
        "amount": sale_return.gross_amount,
        "taxAmount": sale_return.tax_amount,
        "currency": sale_return.currency,
        "reason": sale_return.reason,
        "lines": [
            {
                "lineId": str(line.order_line.line_number),
                "variantId": str(line.order_line.variant_id),
                "quantity": line.quantity,
                "restock": line.restock,
                "locationId": None if line.location_id is None else str(line.location_id),
            }
            for line in sale_return.lines.select_related("order_line").order_by("order_line__line_number")
        ],
    }


def refund_mismatch(sale_return: SaleReturn, order: SaleOrder, merchant_id: int, refund: dict, txn: dict | None = None) -> str | None:
    """Why `refund` (payment's record, from an answer or a webhook) is not the refund of
    `sale_return`, or None when it is: its merchant, transaction, reference, id (once known),
    currency and amounts must be the return's. `txn`, when given, is the transaction it came with."""
    U = UnmatchedRefund.Reason
    if str(refund.get("merchantId")) != str(merchant_id) or (txn is not None and str(txn.get("merchantId")) != str(merchant_id)):
        return U.OTHER_MERCHANT
    if id_of(refund.get("transactionId")) != order.payment_transaction_id or (
        txn is not None and id_of(txn.get("id")) != order.payment_transaction_id
    ):
        return U.UNKNOWN_TRANSACTION
    if refund.get("sourceId") != order.placement_reference or (txn is not None and txn.get("sourceId") != order.placement_reference):
        return U.OTHER_REFERENCE
    refund_id = id_of(refund.get("id"))
    if refund_id is None or (sale_return.payment_refund_id is not None and refund_id != sale_return.payment_refund_id):
        return U.UNKNOWN_REFUND
    if refund.get("currency") != sale_return.currency:
        return U.CURRENCY_MISMATCH
    amounts = (refund.get("amount"), refund.get("taxAmount"))
    if any(isinstance(value, bool) for value in amounts) or amounts != (sale_return.gross_amount, sale_return.tax_amount):
        return U.AMOUNT_MISMATCH
    if refund.get("status") not in R.values:
        return U.STATUS_MISMATCH
    return None


def return_outcome(order: SaleOrder, sale_return: SaleReturn, refund: dict) -> str:
    """Inside a transaction holding the order, then the return (both locked, in that order): apply
    what payment says of the return's refund (checked by the caller with refund_mismatch). Returns
    "refunded", "refund_failed", "pending" or "ignored" (already final the same way)."""
    status = refund["status"]
    if sale_return.status != R.PENDING:
        return "ignored"
    sale_return.payment_refund_id = id_of(refund["id"])
    sale_return.payment_refund = refund
    sale_return.submitted_at = sale_return.submitted_at or timezone.now()
    if status == R.SUCCEEDED:
        _succeed(order, sale_return)
        return "refunded"
    if status == R.FAILED:
        _fail(sale_return, str(refund.get("failureReason") or "FAILED"))
        return "refund_failed"
    sale_return.save()
    return "pending"


def _succeed(order: SaleOrder, sale_return: SaleReturn) -> None:
    now = timezone.now()
    sale_return.status = R.SUCCEEDED
    sale_return.succeeded_at = now
    sale_return.save()
    refunded_units = dict(
        SaleReturnLine.objects.filter(order_line__order_id=order.id, sale_return__status=R.SUCCEEDED)
        .values("order_line_id")
        .annotate(units=Sum("quantity"))
        .values_list("order_line_id", "units")
        .order_by()
    )
    everything = all(refunded_units.get(line.id, 0) >= line.quantity for line in order.lines.all())
    order.status = S.REFUNDED if everything else S.PARTIALLY_REFUNDED
    order.refunded_amount += sale_return.gross_amount
    order.refunded_tax_amount += sale_return.tax_amount
    order.refunded_at = now
    order.save()
    changed(
        order,
        "order.refunded",
        extra={
            "returnId": str(sale_return.id),
            "returnGrossAmount": sale_return.gross_amount,
            "refundedAmount": order.refunded_amount,
        },
    )
    log.info("commerce.return.succeeded", orderId=str(order.id), returnId=str(sale_return.id), status=order.status)


def _fail(sale_return: SaleReturn, reason: str) -> None:
    sale_return.status = R.FAILED
    sale_return.failure_reason = reason[:255]
    sale_return.failed_at = timezone.now()
    sale_return.save()
    log.warning("commerce.return.failed", orderId=str(sale_return.order_id), returnId=str(sale_return.id), reason=reason)


def _locked_pair(sale_return: SaleReturn) -> tuple[SaleOrder, SaleReturn]:
    """The order, then its return, locked in that order (as every refund path takes them)."""
    order = locked(sale_return.order_id)
    return order, SaleReturn.objects.select_for_update().get(pk=sale_return.id)


def return_submit(*, return_id: int) -> SaleReturn:
    """Ask payment for a PENDING return's refund (Idempotency-Key: the return's id, so asking again
    finds the same refund) and apply its answer: SUCCEEDED or FAILED at once when the provider
    answered synchronously; PENDING until payment's webhook or the sweep tells the outcome. A
    refusal fails the return (its units free again) with payment's code; no answer, "not now" or an
    answer about something else leave it PENDING for the sweep."""
    sale_return = SaleReturn.objects.select_related("order").get(pk=return_id)
    if sale_return.status != R.PENDING:
        return sale_return
    order = sale_return.order
    subscription_follow_refunds(merchant_id=order.merchant_id)
    try:
        refund = clients.refund_transaction(
            transaction_id=order.payment_transaction_id, key=str(sale_return.id), body=_payment_body(sale_return)
        )
    except Unavailable as exc:
        log.warning("commerce.return.submit_deferred", returnId=str(sale_return.id), error=str(exc))
        return sale_return
    except Refused as exc:
        if exc.code in NOT_NOW:
            log.warning("commerce.return.submit_deferred", returnId=str(sale_return.id), error=exc.code)
            return sale_return
        with transaction.atomic(using=DB):
            order, sale_return = _locked_pair(sale_return)
            if sale_return.status == R.PENDING and sale_return.payment_refund_id is None:
                _fail(sale_return, exc.code)
        return sale_return
    reason = refund_mismatch(sale_return, order, order.merchant_id, refund) if isinstance(refund, dict) else "NOT_A_REFUND"
    if reason is None and SaleReturn.objects.filter(payment_refund_id=id_of(refund["id"])).exclude(pk=sale_return.id).exists():
        reason = UnmatchedRefund.Reason.UNKNOWN_REFUND
    if reason is not None:
        log.error("commerce.order.sibling_answer_invalid", service="payment", orderId=str(order.id), returnId=str(return_id), reason=reason)
        return sale_return
    with transaction.atomic(using=DB):
        order, sale_return = _locked_pair(sale_return)
        return_outcome(order, sale_return, refund)
    return sale_return


def returns_resume(*, limit: int = 200) -> int:
    """The sweep's work: PENDING returns older than RESUME_AFTER_SECONDS are asked of payment again
    (a submission that got no answer) or their refund read (an outcome whose webhook was lost).
    Returns how many it resolved."""
    due = SaleReturn.objects.filter(status=R.PENDING, created_at__lte=timezone.now() - timedelta(seconds=RESUME_AFTER_SECONDS))
    resolved = 0
    for sale_return in list(due.select_related("order").order_by("created_at")[:limit]):
        if sale_return.payment_refund_id is None:
            resolved += return_submit(return_id=sale_return.id).status != R.PENDING
            continue
        try:
            refund = clients.refund(refund_id=sale_return.payment_refund_id)
        except (Unavailable, Refused) as exc:
            log.warning("commerce.return.check_failed", returnId=str(sale_return.id), error=str(exc))
            continue
        order = sale_return.order
        reason = refund_mismatch(sale_return, order, order.merchant_id, refund) if isinstance(refund, dict) else "NOT_A_REFUND"
        if reason is not None:
            log.error("commerce.order.sibling_answer_invalid", service="payment", returnId=str(sale_return.id), reason=reason)
            continue
        with transaction.atomic(using=DB):
            order, current = _locked_pair(sale_return)
            resolved += return_outcome(order, current, refund) in ("refunded", "refund_failed")
    return resolved


def awaiting_refund_id(order: SaleOrder, refund: dict) -> bool:
    """Whether a refund payment tells of may be a return of `order` whose submission's answer is not
    recorded yet (a webhook overtaking the answer): a PENDING return without a refund id, of the
    refund's amounts. The webhook is then refused, so payment delivers it again later."""
    amounts = (refund.get("amount"), refund.get("taxAmount"))
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in amounts):
        return False
    pending = SaleReturn.objects.filter(order=order, status=R.PENDING, payment_refund_id__isnull=True)
    return pending.filter(gross_amount=amounts[0], tax_amount=amounts[1]).exists()
