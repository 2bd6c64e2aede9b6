"""Inventory's seeds: the baseline permissions of OWNER, EMPLOYEE and CASHIER on inventory's
resources (spec 1.2.2, idempotent: `manage.py seed` and RUN_MODE=migrate re-run it)."""

from merchant_platform.policy import policy_seed_role_permissions

LOCATION, ITEM, STOCK, TRACKING = "inventory.Location", "inventory.Item", "inventory.Stock", "inventory.Tracking"
TICKET, PURCHASE_ORDER = "inventory.Ticket", "inventory.PurchaseOrder"

BASELINE = {
    "OWNER": [f"{LOCATION}.*", f"{ITEM}.*", f"{STOCK}.*", f"{TRACKING}.*", f"{TICKET}.*", f"{PURCHASE_ORDER}.*"],
    # Staff of a merchant count, adjust and receive; locations and oversell policy stay with the owner.
    "EMPLOYEE": [
        f"{LOCATION}.read",
        f"{ITEM}.read",
        f"{STOCK}.read",
        f"{STOCK}.adjust",
        f"{TRACKING}.read",
        f"{TICKET}.read",
        f"{TICKET}.create",
        f"{TICKET}.update",
        f"{PURCHASE_ORDER}.read",
        f"{PURCHASE_ORDER}.create",
        f"{PURCHASE_ORDER}.update",
        f"{PURCHASE_ORDER}.receive",
    ],
    "CASHIER": [f"{LOCATION}.read", f"{ITEM}.read", f"{STOCK}.read"],
}


def run() -> None:
    policy_seed_role_permissions(source="inventory", baseline=BASELINE)
