"""Creation and edits of draft sale orders, their lines priced from the catalog."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from apps.commerce.models import Merchant, ProductVariant
from apps.commerce.sales.models import SaleOrder, SaleOrderLine
from apps.commerce.sales.services.records import CHANNELS, DB, S, changed, illegal, locked
from apps.commerce.services import amount_too_large
from merchant_platform import references
from merchant_platform.errors import Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger
from merchant_platform.money import MAX_AMOUNT, MAX_QUANTITY

log = get_logger(__name__)


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
        changed(order)
    return order


def order_update(*, order_id: int, lines: list[dict] | None = None, **changes) -> SaleOrder:
    """Change a DRAFT: its contact, note, finance account, channel, or all its lines (re-priced)."""
    if "payment_channel" in changes:
        _check_channel(changes["payment_channel"])
    with transaction.atomic(using=DB):
        order = locked(order_id)
        if order.status != S.DRAFT:
            raise illegal(order, "changed")
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
        changed(order)
    return order


# --- Placing (the saga) ---------------------------------------------------------------------------
