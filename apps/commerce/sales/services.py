"""Every write of sale orders: creation priced from the catalog, the placing saga across inventory,
taxation and payment, payment webhooks in, cancellation, fulfilment and expiry. Functions take ids
and keyword arguments and raise the kernel's errors (docs/services/commerce.md, "Sale orders").

Placing is one logical transaction over three services, as a saga with compensations:

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
from django.db import DatabaseError, IntegrityError, connections, transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.commerce import selectors as catalog
from apps.commerce.models import (
    Merchant,
    PaymentSubscription,
    PaymentWebhookReceipt,
    ProductVariant,
    SaleOrder,
    SaleOrderLine,
    UnmatchedSettlement,
)
from apps.commerce.sales import clients
from apps.commerce.sales.clients import Refused, Unavailable
from apps.commerce.services import amount_too_large
from merchant_platform import crypto, realtime, references
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger
from merchant_platform.money import MAX_AMOUNT, MAX_QUANTITY

log = get_logger(__name__)
DB = "commerce"
S = SaleOrder.Status
CHANNELS = ("QR", "PHONE_POS", "SMART_POS", "SYSTEM")
SECRET_PURPOSE = "payment-webhook-secret"
RESERVATION_MARGIN_SECONDS = 600  # inventory holds the stock this long after the order would expire
FINAL_ATTEMPT_STATES = ("FAILED", "EXPIRED", "CANCELLED")


def _room(merchant_id: int) -> str:
    return f"merchant.{merchant_id}.commerce"


def _unavailable(error: Unavailable) -> ApiError:
    return ApiError(
        f"The {error.service} service did not answer; nothing was kept. Try again.",
        code=f"{error.service.upper()}_UNAVAILABLE",
        status_code=503,
    )


def _invalid_answer(service: str, order: SaleOrder, reason: str) -> ApiError:
    """A sibling answered something that is not about this order (another merchant, reference,
    line or amount): nothing of it is kept, and the operator learns of it from the error log."""
    log.error("commerce.order.sibling_answer_invalid", service=service, orderId=str(order.id), reason=reason)
    return ApiError(
        f"The {service} service answered for something else than this order ({reason}); nothing was kept.",
        code=f"{service.upper()}_ANSWER_INVALID",
        status_code=502,
    )


def _illegal(order: SaleOrder, action: str) -> Conflict:
    return Conflict(f"A {order.status} order cannot be {action}.", code="ILLEGAL_TRANSITION", extra={"status": order.status})


def _locked(order_id: int) -> SaleOrder:
    order = SaleOrder.objects.select_for_update().filter(pk=order_id).first()
    if order is None:
        raise NotFound("No sale order has this id.")
    return order


def _changed(order: SaleOrder, event: str | None = None) -> None:
    """Inside the order's transaction: the footer summary and, for a move, the merchant's room."""
    merchant_id = order.merchant_id
    transaction.on_commit(lambda: catalog.summary_changed(merchant_id), using=DB)
    if event is not None:
        payload = {
            "orderId": str(order.id),
            "status": order.status,
            "grossAmount": order.gross_amount,
            "currency": order.currency,
            "closingReason": order.closing_reason,
        }
        realtime.broadcast(_room(merchant_id), event, payload, using=DB)


# --- Creation and edits of drafts -----------------------------------------------------------------


def _priced_lines(merchant_id: int, currency: str, lines: list[dict]) -> list[SaleOrderLine]:
    """Lines from the catalog as it is now: the variant's price, SKU and product."""
    if not lines:
        raise InvalidInput({"lines": "Give at least one line."})
    if len(lines) > settings.COMMERCE_ORDER_MAX_LINES:
        raise InvalidInput({"lines": f"At most {settings.COMMERCE_ORDER_MAX_LINES} lines."})
    ids = [line["variant_id"] for line in lines]
    if len(set(ids)) != len(ids):
        raise InvalidInput({"lines": "Each variant may appear once (give its quantity)."})
    variants = {v.id: v for v in ProductVariant.objects.select_related("primary_product").filter(pk__in=ids, merchant_id=merchant_id)}
    priced = []
    for number, line in enumerate(lines, start=1):
        field = f"lines[{number - 1}]"
        variant = variants.get(line["variant_id"])
        if variant is None or variant.primary_product.deleted_at is not None:
            raise InvalidInput({f"{field}.variantId": "No variant of this merchant has this id."})
        if variant.status != ProductVariant.Status.ACTIVE:
            raise InvalidInput({f"{field}.variantId": "This variant is not ACTIVE."})
        if variant.currency != currency:
            raise InvalidInput({f"{field}.variantId": f"This variant is priced in {variant.currency}, the order in {currency}."})
        quantity = line["quantity"]
        if not 1 <= quantity <= MAX_QUANTITY:
            raise InvalidInput({f"{field}.quantity": f"Give a whole number from 1 to {MAX_QUANTITY}."})
        if variant.price_amount * quantity > MAX_AMOUNT:
            raise amount_too_large(field, f"Line {number}'s total (unit price x quantity)")
        priced.append(
            SaleOrderLine(
                line_number=number,
                variant_id=variant.id,
                product_id=variant.primary_product_id,
                tax_group_id=variant.primary_product.tax_group_id,
                sku=variant.sku,
                name=(variant.name or variant.primary_product.name)[:200],
                quantity=quantity,
                unit_price_amount=variant.price_amount,
                net_amount=variant.price_amount * quantity,
            )
        )
    if sum(line.net_amount for line in priced) > MAX_AMOUNT:
        raise amount_too_large("lines", "The order's total")
    return priced


def _check_channel(channel: str) -> None:
    if channel not in CHANNELS:
        raise InvalidInput({"paymentChannel": f"Give one of {', '.join(CHANNELS)}."})


def finance_account_check(merchant_id: int, finance_account_id: int | None) -> None:
    """A finance account a user names on an order (create or update) is the merchant's own: finance,
    which owns it, answers (400 naming `financeAccountId` otherwise, 503 when it cannot answer).
    Called by the views before the write; internal callers pass ids they already hold."""
    if finance_account_id is not None:
        references.check_owned(
            field="financeAccountId",
            url=f"{settings.COMMERCE_FINANCE_URL}/accounts/{finance_account_id}",
            merchant_id=merchant_id,
            what="finance account",
        )


def order_create(
    *,
    merchant_id: int,
    lines: list[dict],
    currency: str | None = None,
    customer_name: str = "",
    customer_email: str = "",
    customer_phone: str = "",
    note: str = "",
    finance_account_id: int | None = None,
    payment_channel: str = "QR",
    created_by: int | None = None,
) -> SaleOrder:
    """A DRAFT order of `lines` (`variant_id`, `quantity`) at the catalog's prices, in the
    merchant's default currency unless `currency` is given."""
    _check_channel(payment_channel)
    with transaction.atomic(using=DB):
        merchant = Merchant.objects.filter(pk=merchant_id).first()
        if merchant is None:
            raise NotFound("No merchant has this id.")
        if merchant.status != Merchant.Status.ACTIVE:
            raise Conflict("A suspended merchant does not sell.", code="MERCHANT_SUSPENDED")
        currency = currency or merchant.default_currency
        priced = _priced_lines(merchant_id, currency, lines)
        order = SaleOrder.objects.create(
            merchant_id=merchant_id,
            currency=currency,
            customer_name=customer_name,
            customer_email=customer_email,
            customer_phone=customer_phone,
            note=note,
            finance_account_id=finance_account_id,
            payment_channel=payment_channel,
            net_amount=sum(line.net_amount for line in priced),
            created_by=created_by,
        )
        for line in priced:
            line.order = order
        SaleOrderLine.objects.bulk_create(priced)
        _changed(order)
    return order


def order_update(*, order_id: int, lines: list[dict] | None = None, **changes) -> SaleOrder:
    """Change a DRAFT: its contact, note, finance account, channel, or all its lines (re-priced)."""
    if "payment_channel" in changes:
        _check_channel(changes["payment_channel"])
    with transaction.atomic(using=DB):
        order = _locked(order_id)
        if order.status != S.DRAFT:
            raise _illegal(order, "changed")
        for name, value in changes.items():
            setattr(order, name, value)
        if lines is not None:
            priced = _priced_lines(order.merchant_id, order.currency, lines)
            order.lines.all().delete()
            for line in priced:
                line.order = order
            SaleOrderLine.objects.bulk_create(priced)
            order.net_amount = sum(line.net_amount for line in priced)
        order.save()
        _changed(order)
    return order


# --- Placing (the saga) ---------------------------------------------------------------------------


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
        order = _locked(order_id)
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
        raise _illegal(order, "placed")


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
            current = _locked(order.id)
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
            _changed(current, "order.placed")
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
        raise _unavailable(exc) from None
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
        raise _invalid_answer("taxation", order, "another merchant or currency")
    answered = quote.get("lines")
    if not isinstance(answered, list) or len(answered) != len(taxed):
        raise _invalid_answer("taxation", order, "another number of lines")
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
            raise _invalid_answer("taxation", order, f"line {line.line_number} is not the line asked for")
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
        raise _invalid_answer("inventory", order, "not a list of reservations")
    if any(r.get("merchantId") != str(order.merchant_id) or r.get("orderId") != order.placement_reference for r in reservations):
        _undo(order)
        raise _invalid_answer("inventory", order, "another merchant or reference")
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
        raise _unavailable(exc) from None
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
    if not isinstance(txn, dict) or _id(txn.get("id")) is None:
        _undo(order, find_transaction=True)
        raise _invalid_answer("payment", order, "no transaction id")
    if txn.get("merchantId") != str(order.merchant_id) or txn.get("sourceId") != order.placement_reference:
        _undo(order)  # not this merchant's or reference's: not ours to cancel
        raise _invalid_answer("payment", order, "another merchant or reference")
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
        raise _unavailable(exc) from None
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


def _id(value) -> int | None:
    """A snowflake id as payment writes it (a decimal string), else None."""
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    return int(text) if text.isdecimal() and len(text) <= 19 and int(text) < 2**63 else None


def _settlement_mismatch(order: SaleOrder | None, merchant_id: int, txn: dict) -> str | None:
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
    transaction_id = _id(about.get("id"))
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
            reason = _settlement_mismatch(order, merchant_id, txn)
            if reason == UnmatchedSettlement.Reason.NOT_AWAITING_PAYMENT and order.status in (S.PAID, S.FULFILLED):
                return "ignored"  # its own settlement, told again
            if reason is not None:
                _record_unmatched(merchant_id=merchant_id, message_id=message_id, reason=reason, txn=txn, payload=payload, order=order)
                return "unmatched"
            _mark_paid(order, txn)
            return "paid"
        if order is None or str(about.get("merchantId")) != str(merchant_id) or about.get("sourceId") != order.placement_reference:
            log.info("commerce.webhook.no_order", merchantId=str(merchant_id), eventType=event, transactionId=str(about.get("id"))[:64])
            return "ignored"
        if event == "transaction.cancelled":
            if order.status == S.PLACED:
                _close(order, S.CANCELLED, "PAYMENT_CANCELLED")
                transaction.on_commit(lambda: _release(order.id), using=DB)
                return "cancelled"
            return "ignored"
        expire = event == "attempt.expired" and order.status == S.PLACED
    if expire:
        return "expired" if order_expire_if_unpaid(order_id=order.id) else "ignored"
    return "ignored"


def _mark_paid(order: SaleOrder, txn: dict) -> None:
    """Inside a transaction holding the PLACED order: its own transaction settled (checked by the
    caller with `_settlement_mismatch`)."""
    order.status = S.PAID
    order.paid_at = timezone.now()
    order.payment = txn
    order.save()
    _changed(order, "order.paid")
    log.info("commerce.order.paid", orderId=str(order.id), transactionId=str(txn.get("id")))


def _paid_by(order: SaleOrder, txn: dict) -> bool:
    """Whether `txn`, which payment answered for the order's transaction id, settles this order;
    a mismatch is logged at error level for reconciliation."""
    reason = (
        _settlement_mismatch(order, order.merchant_id, txn) if _id(txn.get("id")) == order.payment_transaction_id else "OTHER_TRANSACTION"
    )
    if reason is not None:
        log.error("commerce.settlement.unmatched", merchantId=str(order.merchant_id), reason=reason, orderId=str(order.id))
    return reason is None


def _close(order: SaleOrder, status: str, reason: str) -> None:
    order.status = status
    order.closing_reason = reason
    if status == S.CANCELLED:
        order.cancelled_at = timezone.now()
    else:
        order.expired_at = timezone.now()
    order.save()
    _changed(order, f"order.{status.lower()}")


def _release(order_id: int) -> bool:
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
            raise _unavailable(exc) from None
        except Refused:
            try:
                txn = clients.transaction(transaction_id=order.payment_transaction_id)
            except (Unavailable, Refused) as exc:
                raise _unavailable(exc if isinstance(exc, Unavailable) else Unavailable("payment", exc.code)) from None
            settled = txn if txn.get("status") == "SETTLED" else None
    with transaction.atomic(using=DB):
        order = _locked(order_id)
        if order.status != S.PLACED:
            return order
        if settled is not None and _paid_by(order, settled):
            _mark_paid(order, settled)
            return order
        _close(order, status, reason)
    _release(order.id)
    return order


def order_cancel(*, order_id: int) -> SaleOrder:
    """DRAFT or PLACED -> CANCELLED (a placed order's payment is cancelled and its stock released);
    a paid order cannot be cancelled here (409; refunds are not part of this platform yet)."""
    with transaction.atomic(using=DB):
        order = _locked(order_id)
        if order.status == S.DRAFT:
            _close(order, S.CANCELLED, "CANCELLED")
            return order
        if order.status != S.PLACED:
            raise _illegal(order, "cancelled")
    order = _close_unpaid(order_id, S.CANCELLED, "CANCELLED")
    if order.status != S.CANCELLED:
        raise _illegal(order, "cancelled")
    return order


def order_fulfill(*, order_id: int) -> SaleOrder:
    """PAID -> FULFILLED."""
    with transaction.atomic(using=DB):
        order = _locked(order_id)
        if order.status != S.PAID:
            raise _illegal(order, "fulfilled")
        order.status = S.FULFILLED
        order.fulfilled_at = timezone.now()
        order.save()
        _changed(order, "order.fulfilled")
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
            current = _locked(order.id)
            if current.status == S.PLACED and _paid_by(current, txn):
                _mark_paid(current, txn)
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
        _release(order_id)
    return expired
