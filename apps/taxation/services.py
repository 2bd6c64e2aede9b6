"""Every write and rule of the taxation service: tax groups and their items, provisioning of
products (tax sets, spec 3.2 and 4.6), rounding policies, and the quote.

Functions take ids and keyword arguments, so views, the product stream consumer, the admin and
`manage.py resync_tax` call them alike; errors are the kernel's (docs/services/taxation.md).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from apps.taxation import quotes
from apps.taxation.models import Product, RoundingPolicy, TaxGroup, TaxItem, TaxSet
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger

DB = "taxation"
log = get_logger(__name__)

MAX_ITEMS_PER_GROUP = 20
MAX_QUOTE_LINES = 200

# Who provisioned a tax set.
API, STREAM, ADMIN, RESYNC = "api", "stream", "admin", "resync"

# Provisioning outcomes (the `outcome` of the provisioning answers).
PROVISIONED, ALREADY_PROVISIONED = "PROVISIONED", "ALREADY_PROVISIONED"
DEPROVISIONED, NOT_PROVISIONED = "DEPROVISIONED", "NOT_PROVISIONED"


# --- Tax groups -----------------------------------------------------------------------------------


def _check_items(items: Sequence[dict]) -> None:
    """Items of one group: at most MAX_ITEMS_PER_GROUP, each range ordered, and no two items of the
    same name in effect on the same day (a rate change is a new item starting after the old one)."""
    if len(items) > MAX_ITEMS_PER_GROUP:
        raise InvalidInput({"items": f"A tax group has at most {MAX_ITEMS_PER_GROUP} items."})
    errors: dict[str, str] = {}
    for index, item in enumerate(items):
        start, end = item.get("valid_from"), item.get("valid_to")
        if start is not None and end is not None and start > end:
            errors[f"items.{index}.validTo"] = "The range ends before it starts."
            continue
        for earlier_index, earlier in enumerate(items[:index]):
            if earlier["name"] != item["name"]:
                continue
            other_start, other_end = earlier.get("valid_from"), earlier.get("valid_to")
            if (start is None or other_end is None or start <= other_end) and (other_start is None or end is None or other_start <= end):
                errors[f"items.{index}.validFrom"] = f"The item {item['name']!r} is already in effect then (item {earlier_index})."
                break
    if errors:
        raise InvalidInput(errors)


def _write_items(group: TaxGroup, items: Sequence[dict]) -> None:
    TaxItem.objects.using(DB).bulk_create(
        [
            TaxItem(
                group=group,
                position=position,
                name=item["name"],
                rate=item["rate"],
                inclusive=item.get("inclusive", False),
                compound=item.get("compound", False),
                valid_from=item.get("valid_from"),
                valid_to=item.get("valid_to"),
            )
            for position, item in enumerate(items)
        ]
    )


def tax_group_create(
    *, merchant_id: int, name: str, items: Sequence[dict], description: str = "", created_by: int | None = None
) -> TaxGroup:
    """A group with its items, in one transaction (nothing half-written)."""
    _check_items(items)
    with transaction.atomic(using=DB):
        group = TaxGroup.objects.create(merchant_id=merchant_id, name=name, description=description, created_by=created_by)
        _write_items(group, items)
    log.info("taxation.tax_group.created", taxGroupId=str(group.id), merchantId=str(merchant_id), items=len(items))
    return group


def tax_group_update(
    *, tax_group_id: int, name: str | None = None, description: str | None = None, items: Sequence[dict] | None = None
) -> TaxGroup:
    """Rename or describe a group; `items`, when given, replaces every item (the old ones are soft
    deleted, so quotes already given keep naming rows that still resolve)."""
    if items is not None:
        _check_items(items)
    with transaction.atomic(using=DB):
        group = _locked_group(tax_group_id)
        if name is not None:
            group.name = name
        if description is not None:
            group.description = description
        group.save(update_fields=["name", "description", "updated_at"])
        if items is not None:
            TaxItem.objects.using(DB).filter(group=group).delete()
            _write_items(group, items)
    return group


def tax_group_delete(*, tax_group_id: int) -> None:
    """Soft delete; refused (409 TAX_GROUP_IN_USE) while a product is provisioned with the group."""
    with transaction.atomic(using=DB):
        group = _locked_group(tax_group_id)
        if TaxSet.objects.filter(group=group, status=TaxSet.Status.ACTIVE).exists():
            raise Conflict("Products are provisioned with this tax group; deprovision them first.", code="TAX_GROUP_IN_USE")
        TaxItem.objects.using(DB).filter(group=group).delete()
        group.delete()


def _locked_group(tax_group_id: int) -> TaxGroup:
    group = TaxGroup.objects.select_for_update().filter(pk=tax_group_id).first()
    if group is None:
        raise NotFound("No tax group has this id.", code="TAX_GROUP_NOT_FOUND")
    return group


# --- Provisioning (spec 3.2, 4.6, 7) --------------------------------------------------------------


@dataclass(frozen=True)
class Provisioning:
    outcome: str
    tax_set: TaxSet | None
    deactivated: TaxSet | None = None


def tax_group_not_found(tax_group_id: int, *, product_id: int | None = None) -> ApiError:
    """Spec 7: logged at error level; a 404 naming the field."""
    log.error("taxation.provision.tax_group_not_found", taxGroupId=str(tax_group_id), productId=str(product_id))
    return ApiError(
        "No tax group has this id.",
        code="TAX_GROUP_NOT_FOUND",
        status_code=404,
        extra={"errors": [{"field": "taxGroupId", "code": "not_found", "message": "No tax group has this id."}]},
    )


def _tax_group_has_no_items(group: TaxGroup, product_id: int) -> ApiError:
    log.error("taxation.provision.tax_group_has_no_items", taxGroupId=str(group.id), productId=str(product_id))
    message = "The tax group has no items in effect now or later."
    return ApiError(
        message,
        code="TAX_GROUP_HAS_NO_ITEMS",
        status_code=422,
        extra={"errors": [{"field": "taxGroupId", "code": "no_items", "message": message}]},
    )


# Provisionings of one product run one at a time: a transaction-level advisory lock keyed by the
# product (two int4 keys: this namespace and the product id folded to 31 bits; two products that
# fold alike only wait for each other). Without it, concurrent first provisionings both find no
# active set and all but one hit the partial unique index.
PRODUCT_LOCK_NAMESPACE = 0x7A78_0001


def _lock_product(product_id: int) -> None:
    with connections[DB].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [PRODUCT_LOCK_NAMESPACE, (product_id ^ (product_id >> 31)) & 0x7FFF_FFFF])


def _shared_locked_group(tax_group_id: int) -> TaxGroup | None:
    """The live group, locked FOR SHARE: provisionings with one group run side by side, while a
    delete (FOR UPDATE, then its in-use check) waits for them, so no set is bound to a deleted group."""
    with connections[DB].cursor() as cursor:
        cursor.execute("SELECT 1 FROM tax_group WHERE id = %s AND deleted_at IS NULL FOR SHARE", [tax_group_id])
        if cursor.fetchone() is None:
            return None
    return TaxGroup.objects.get(pk=tax_group_id)


def tax_set_provision(*, product_id: int, tax_group_id: int, merchant_id: int | None = None, source: str = API) -> Provisioning:
    """Bind the product to the group with a new ACTIVE tax set, deactivating the product's previous
    active set (spec 3.2). Already active with this group: nothing changes (ALREADY_PROVISIONED).
    `merchant_id`, when given (the product stream knows the product's merchant), must be the group's:
    another merchant's group answers as a missing one."""
    today = timezone.now().date()
    with transaction.atomic(using=DB):
        _lock_product(product_id)
        group = _shared_locked_group(tax_group_id)
        if group is None or (merchant_id is not None and group.merchant_id != merchant_id):
            raise tax_group_not_found(tax_group_id, product_id=product_id)
        if not group.items.filter(deleted_at__isnull=True).exclude(valid_to__lt=today).exists():
            raise _tax_group_has_no_items(group, product_id)
        active = TaxSet.objects.select_for_update().filter(product_id=product_id, status=TaxSet.Status.ACTIVE).first()
        if active is not None and active.group_id == group.id:
            log.info("taxation.provision.skipped", productId=str(product_id), taxSetId=str(active.id), source=source)
            return Provisioning(ALREADY_PROVISIONED, active)
        if active is not None:
            _deactivate(active)
        tax_set = TaxSet.objects.create(
            merchant_id=group.merchant_id, product_id=product_id, group=group, status=TaxSet.Status.ACTIVE, source=source
        )
    log.info(
        "taxation.provisioned",
        productId=str(product_id),
        taxSetId=str(tax_set.id),
        taxGroupId=str(group.id),
        deactivated=str(active.id) if active else None,
        source=source,
    )
    return Provisioning(PROVISIONED, tax_set, active)


def _deactivate(tax_set: TaxSet) -> None:
    tax_set.status = TaxSet.Status.DEACTIVATED
    tax_set.deactivated_at = timezone.now()
    tax_set.save(update_fields=["status", "deactivated_at", "updated_at"])


def tax_set_deprovision(*, product_id: int, merchant_id: int | None = None, source: str = API) -> Provisioning:
    """Deactivate the product's active tax set (spec 3.2). Without one nothing changes
    (NOT_PROVISIONED), so a replayed or repeated deprovisioning is harmless."""
    with transaction.atomic(using=DB):
        _lock_product(product_id)
        active = TaxSet.objects.select_for_update().filter(product_id=product_id, status=TaxSet.Status.ACTIVE)
        if merchant_id is not None:
            active = active.filter(merchant_id=merchant_id)
        tax_set = active.first()
        if tax_set is None:
            return Provisioning(NOT_PROVISIONED, None)
        _deactivate(tax_set)
    log.info("taxation.deprovisioned", productId=str(product_id), taxSetId=str(tax_set.id), source=source)
    return Provisioning(DEPROVISIONED, tax_set)


class ForeignMerchant(Conflict):
    """A product change names a record of another merchant than the product's: taxation recorded
    the product under another merchant, or the tax group is another merchant's. A record's merchant
    never changes through a change, so no retry can fix it (the consumer parks it at once)."""

    default_code = "FOREIGN_MERCHANT"


def _check_merchants(*, product_id: int, merchant_id: int, tax_group_id: int | None) -> None:
    """Refuse (ForeignMerchant) a change naming the product under another merchant than the one
    taxation recorded (its `taxation_product` row, deleted or not, and its active tax set, which
    names the merchant for products provisioned before taxation recorded products), or naming a
    tax group (deleted or not) of another merchant. A missing group is left to tax_set_provision."""
    recorded = set(Product.all_objects.using(DB).filter(product_id=product_id).values_list("merchant_id", flat=True))
    recorded |= set(TaxSet.objects.filter(product_id=product_id, status=TaxSet.Status.ACTIVE).values_list("merchant_id", flat=True))
    if recorded - {merchant_id}:
        owners = ", ".join(map(str, sorted(recorded)))
        log.warning("taxation.product_change.foreign_product", productId=str(product_id), merchantId=str(merchant_id), recorded=owners)
        raise ForeignMerchant(f"product {product_id} is a product of merchant {owners}, not of merchant {merchant_id}.")
    if tax_group_id is None:
        return
    group_merchant = TaxGroup.all_objects.filter(pk=tax_group_id).values_list("merchant_id", flat=True).first()
    if group_merchant is not None and group_merchant != merchant_id:
        log.warning(
            "taxation.product_change.foreign_tax_group",
            productId=str(product_id),
            taxGroupId=str(tax_group_id),
            merchantId=str(merchant_id),
        )
        raise ForeignMerchant(f"tax_group_id {tax_group_id} is a tax group of another merchant than the product's ({merchant_id}).")


def _product_learn(*, product_id: int, merchant_id: int, live: bool) -> None:
    """Record the product's merchant and whether it is live (one upsert by the product id; the
    merchant is written once, _check_merchants having refused any other)."""
    Product.all_objects.using(DB).bulk_create(
        [Product(product_id=product_id, merchant_id=merchant_id, deleted_at=None if live else timezone.now())],
        update_conflicts=True,
        unique_fields=["product_id"],
        update_fields=["deleted_at", "updated_at"],
    )


def product_apply(*, product_id: int, merchant_id: int, tax_group_id: int | None, live: bool = True, source: str = STREAM) -> Provisioning:
    """Follow one commerce product (docs/events.md, PRODUCT): learn its merchant and whether it is
    live; a live product with a tax group is provisioned with it; one without a group, or deleted,
    is deprovisioned. Idempotent. A change naming the product under another merchant than the one
    recorded, or another merchant's tax group, changes nothing (ForeignMerchant)."""
    with transaction.atomic(using=DB):
        _lock_product(product_id)
        _check_merchants(product_id=product_id, merchant_id=merchant_id, tax_group_id=tax_group_id if live else None)
        _product_learn(product_id=product_id, merchant_id=merchant_id, live=live)
        if live and tax_group_id is not None:
            return tax_set_provision(product_id=product_id, tax_group_id=tax_group_id, merchant_id=merchant_id, source=source)
        return tax_set_deprovision(product_id=product_id, merchant_id=merchant_id, source=source)


def product_not_found(product_id: int) -> ApiError:
    message = "No live product of the tax group's merchant has this id."
    return ApiError(
        message,
        code="PRODUCT_NOT_FOUND",
        status_code=404,
        extra={"errors": [{"field": "productId", "code": "not_found", "message": message}]},
    )


def product_provision(*, product_id: int, tax_group_id: int, merchant_id: int, source: str = API) -> Provisioning:
    """Provision a product a caller names (the API): it must be a live product of `merchant_id`
    (the tax group's merchant, where the caller may provision) as commerce's product stream or
    `resync_tax` taught taxation; another merchant's product, an unknown or a deleted one answers
    404 PRODUCT_NOT_FOUND and nothing changes. The group is checked as in tax_set_provision."""
    with transaction.atomic(using=DB):
        _lock_product(product_id)  # the stream's product_apply holds it too: the record cannot change under us
        if not Product.objects.filter(product_id=product_id, merchant_id=merchant_id).exists():
            log.warning("taxation.provision.product_not_found", productId=str(product_id), merchantId=str(merchant_id))
            raise product_not_found(product_id)
        return tax_set_provision(product_id=product_id, tax_group_id=tax_group_id, merchant_id=merchant_id, source=source)


# --- Rounding policies ----------------------------------------------------------------------------


def rounding_policy_set(*, merchant_id: int, mode: str) -> RoundingPolicy:
    """Create or change the merchant's rounding policy (one per merchant)."""
    with transaction.atomic(using=DB):
        policy = RoundingPolicy.objects.select_for_update().filter(merchant_id=merchant_id).first()
        if policy is None:
            try:
                with transaction.atomic(using=DB):
                    return RoundingPolicy.objects.create(merchant_id=merchant_id, mode=mode)
            except IntegrityError:  # created concurrently: change that one
                policy = RoundingPolicy.objects.select_for_update().get(merchant_id=merchant_id)
        policy.mode = mode
        policy.save(update_fields=["mode", "updated_at"])
    return policy


def rounding_mode_of(merchant_id: int) -> str:
    policy = RoundingPolicy.objects.filter(merchant_id=merchant_id).values_list("mode", flat=True).first()
    return policy or RoundingPolicy.Mode.LINE


def rounding_policy_delete(*, rounding_policy_id: int) -> None:
    """Back to the default (LINE)."""
    with transaction.atomic(using=DB):
        policy = RoundingPolicy.objects.select_for_update().filter(pk=rounding_policy_id).first()
        if policy is None:
            raise NotFound("No rounding policy has this id.")
        policy.delete()


# --- Quotes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuoteLine:
    product_id: int
    quantity: Decimal
    unit_price: int
    discount: int
    tax_set: TaxSet


@dataclass(frozen=True)
class Quote:
    merchant_id: int
    currency: str
    date: datetime.date
    lines: list[QuoteLine]
    tax: quotes.QuoteTax


def quote_compute(*, merchant_id: int, currency: str, lines: Sequence[dict], date: datetime.date | None = None) -> Quote:
    """The taxes of `lines` ({product_id, quantity, unit_price, discount}) for the merchant on `date`
    (default today, UTC): each product's active tax set of that merchant, its items in effect that
    day, rounded by the merchant's rounding policy. Reads only."""
    day = date or timezone.now().date()
    if not lines:
        raise InvalidInput({"lines": "Give at least one line."})
    if len(lines) > MAX_QUOTE_LINES:
        raise InvalidInput({"lines": f"A quote has at most {MAX_QUOTE_LINES} lines."})
    product_ids = {line["product_id"] for line in lines}
    tax_sets = {
        tax_set.product_id: tax_set
        for tax_set in TaxSet.objects.filter(merchant_id=merchant_id, product_id__in=product_ids, status=TaxSet.Status.ACTIVE)
    }
    errors: dict[str, str] = {}
    for index, line in enumerate(lines):
        if line["product_id"] not in tax_sets:
            errors[f"lines.{index}.productId"] = "This product is not provisioned with a tax group of this merchant."
        if quotes.line_amount(line["quantity"], line["unit_price"], line.get("discount", 0)) < 0:
            errors[f"lines.{index}.discount"] = "The discount is larger than quantity x unit price."
    if errors:
        raise InvalidInput(errors)
    items_by_group: dict[int, list[TaxItem]] = {}
    group_ids = {tax_set.group_id for tax_set in tax_sets.values()}
    for item in TaxItem.objects.filter(group_id__in=group_ids).order_by("position", "id"):
        if item.in_effect(day):
            items_by_group.setdefault(item.group_id, []).append(item)
    rates = {
        group_id: tuple(
            quotes.Rate(item_id=item.id, name=item.name, rate=item.rate, inclusive=item.inclusive, compound=item.compound) for item in items
        )
        for group_id, items in items_by_group.items()
    }
    quote_lines = [
        QuoteLine(
            product_id=line["product_id"],
            quantity=line["quantity"],
            unit_price=line["unit_price"],
            discount=line.get("discount", 0),
            tax_set=tax_sets[line["product_id"]],
        )
        for line in lines
    ]
    tax = quotes.compute(
        [
            quotes.Line(
                amount=quotes.line_amount(line.quantity, line.unit_price, line.discount), rates=rates.get(line.tax_set.group_id, ())
            )
            for line in quote_lines
        ],
        rounding=rounding_mode_of(merchant_id),
    )
    return Quote(merchant_id=merchant_id, currency=currency, date=day, lines=quote_lines, tax=tax)
