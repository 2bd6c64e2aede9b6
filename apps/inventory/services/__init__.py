"""Every write of the inventory service, one module per aggregate (docs/services/inventory.md,
"Code"); this package re-exports what the views, consumers, tasks and admin call. Functions take
ids and keyword arguments, run in one transaction on inventory's alias and raise the kernel's
errors, so the API, the internal API, the consumers, the beat task and the admin share the same
rules.

The stock-change core (`stock._apply`) is the only code that changes stock: it locks the stock rows a
change touches in primary-key order (one `SELECT ... ORDER BY id FOR UPDATE`), applies the changes,
writes one immutable tracking row each and never lets available stock cross zero on an item without
allowOversell. Lock order across the service: the order's advisory lock, then items, then stock rows,
so concurrent writers queue instead of deadlocking (docs/architecture.md section 10). Rows are locked FOR
NO KEY UPDATE: writers still exclude each other, but inserts that reference a locked row (tracking,
stock, reservations: their foreign-key checks take KEY SHARE) are not blocked, which with FOR UPDATE
deadlocked a receipt (item locked, waiting for a stock row) against a deduction (stock row locked,
inserting tracking that references the item).
"""

from apps.inventory.services.common import (
    DB,
    DEFAULT_LOCATION_NAME,
    MAX_LINES,
    AmountTooLarge,
    ForeignRecord,
    InsufficientStock,
    QuantityLimitExceeded,
)
from apps.inventory.services.deductions import stock_deduct_order, stock_deduct_orders
from apps.inventory.services.locations import (
    item_sync,
    item_update,
    location_create,
    location_delete,
    location_ensure_default,
    location_update,
)
from apps.inventory.services.purchase_orders import (
    CurrencyMismatch,
    purchase_order_cancel,
    purchase_order_create,
    purchase_order_place,
    purchase_order_receive,
)
from apps.inventory.services.reservations import reservation_commit, reservation_release, reservation_reserve, reservations_expire
from apps.inventory.services.returns import RefundLineMismatch, SaleLineNotDeducted, stock_return_refunds
from apps.inventory.services.stock import stock_adjust
from apps.inventory.services.tickets import ticket_apply, ticket_cancel, ticket_count, ticket_create

__all__ = [
    "DB",
    "DEFAULT_LOCATION_NAME",
    "MAX_LINES",
    "AmountTooLarge",
    "CurrencyMismatch",
    "ForeignRecord",
    "InsufficientStock",
    "QuantityLimitExceeded",
    "RefundLineMismatch",
    "SaleLineNotDeducted",
    "item_sync",
    "item_update",
    "location_create",
    "location_delete",
    "location_ensure_default",
    "location_update",
    "purchase_order_cancel",
    "purchase_order_create",
    "purchase_order_place",
    "purchase_order_receive",
    "reservation_commit",
    "reservation_release",
    "reservation_reserve",
    "reservations_expire",
    "stock_adjust",
    "stock_deduct_order",
    "stock_deduct_orders",
    "stock_return_refunds",
    "ticket_apply",
    "ticket_cancel",
    "ticket_count",
    "ticket_create",
]
