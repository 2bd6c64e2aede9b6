"""What inventory's service modules share: the alias, the limits, the errors, the row and order
locks and the look-ups every write starts with."""

from __future__ import annotations

import zlib

from django.db import connections

from apps.inventory.models import Item, Location
from merchant_platform.errors import ApiError, Conflict, NotFound
from merchant_platform.logging import get_logger
from merchant_platform.money import AMOUNT_TOO_LARGE, MAX_AMOUNT, MAX_QUANTITY

DB = "inventory"
DEFAULT_LOCATION_NAME = "Default"
# Lines of one purchase order (and so of one receipt, one purchase-order.received event): a received
# line is about 350 bytes of JSON, so the largest event stays near 200 KB, far below the producer's
# 1 MiB (3,000 lines passed it and blocked the outbox).
MAX_LINES = 500
log = get_logger(__name__)


class InsufficientStock(Conflict):
    def __init__(self, detail: str, *, extra: dict | None = None):
        super().__init__(detail, code="INSUFFICIENT_STOCK", extra=extra)


class AmountTooLarge(ApiError):
    def __init__(self, detail: str, *, field: str):
        super().__init__(detail, code=AMOUNT_TOO_LARGE, status_code=400, extra={"field": field, "maxAmount": MAX_AMOUNT})


class QuantityLimitExceeded(Conflict):
    def __init__(self, detail: str, *, extra: dict):
        super().__init__(detail, code="QUANTITY_LIMIT_EXCEEDED", extra={**extra, "maxQuantity": MAX_QUANTITY})


def _check_amount(value: int, *, field: str) -> None:
    if abs(value) > MAX_AMOUNT:
        raise AmountTooLarge(f"{field} is {value}: at most {MAX_AMOUNT} minor units.", field=field)


class ForeignRecord(NotFound):
    """An event names a record that belongs to another merchant (or a location that does not
    exist): no retry can make it right. Over HTTP it is a 404 like any record the caller cannot
    see; the consumers park the event with this reason."""

    def __init__(self, detail: str, *, extra: dict | None = None):
        super().__init__(detail, code="FOREIGN_RECORD", extra=extra)


def _locked(model, pk: int, *, name: str):
    """The row, locked FOR NO KEY UPDATE: what an UPDATE of non-key columns takes anyway, and it
    lets inserts that reference the row (their foreign-key check takes KEY SHARE) go on."""
    instance = model.objects.select_for_update(no_key=True).filter(pk=pk).first()
    if instance is None:
        raise NotFound(f"No {name} has this id.")
    return instance


def _illegal(entity: str, status: str, verb: str) -> Conflict:
    return Conflict(f"A {entity} in status {status} cannot be {verb}.", code="ILLEGAL_TRANSITION", extra={"currentStatus": status})


def _items(item_ids: set[int], *, merchant_id: int | None = None) -> dict[int, Item]:
    items = {item.id: item for item in Item.objects.filter(pk__in=item_ids)}
    missing = sorted(i for i in item_ids if i not in items or (merchant_id is not None and items[i].merchant_id != merchant_id))
    if missing:
        raise NotFound("No item has this id.", extra={"itemIds": [str(i) for i in missing]})
    return items


def _location(location_id: int, *, merchant_id: int) -> Location:
    location = Location.objects.filter(pk=location_id, merchant_id=merchant_id).first()
    if location is None:
        raise NotFound("No location of this merchant has this id.")
    return location


def _value(quantity: int, unit_cost: int | None) -> int:
    return quantity * (unit_cost or 0)


def _order_lock_key(merchant_id: int, order_id: str) -> int:
    """The advisory-lock key of one merchant's sale order: order references are the merchant's,
    so two merchants' orders with the same reference do not serialise on each other."""
    return zlib.crc32(f"inventory.order:{merchant_id}:{order_id}".encode()) - 2**31


def _lock_order(merchant_id: int, order_id: str) -> None:
    """Serialise every operation on one sale order (reserve, release, commit, deduct) in this
    transaction: a transaction-level advisory lock, taken before any row lock."""
    with connections[DB].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x494E56, _order_lock_key(merchant_id, order_id)])


def _lock_orders(order_keys: list[tuple[int, str]]) -> None:
    """_lock_order for several (merchant, order) pairs, in key order (one statement): two batches
    sharing orders queue instead of crossing."""
    keys = sorted({_order_lock_key(merchant_id, order_id) for merchant_id, order_id in order_keys})
    with connections[DB].cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(%s, k)) FROM (SELECT unnest(%s::integer[]) AS k ORDER BY 1 OFFSET 0) AS keys",
            [0x494E56, keys],
        )
