"""Commerce's seeds: the baseline permissions of OWNER, EMPLOYEE and CASHIER on commerce's
resources (spec 1.2.2, idempotent: `manage.py seed` and RUN_MODE=migrate re-run it)."""

from merchant_platform.policy import policy_seed_role_permissions

MERCHANT = "commerce.Merchant"
PRODUCT = "commerce.Product"
VARIANT = "commerce.ProductVariant"
MEDIA = "commerce.ProductMedia"
INTEGRATION = "commerce.Integration"
SALE_ORDER = "commerce.SaleOrder"

BASELINE = {
    # OWNER reaches the records it created, in the merchants it belongs to, for everything.
    "OWNER": [f"{MERCHANT}.*", f"{PRODUCT}.*", f"{VARIANT}.*", f"{MEDIA}.*", f"{INTEGRATION}.*", f"{SALE_ORDER}.*"],
    # Staff of a merchant keep its catalog; integrations (credentials) stay with the owner and admins.
    "EMPLOYEE": [
        f"{MERCHANT}.read",
        f"{PRODUCT}.read",
        f"{PRODUCT}.create",
        f"{PRODUCT}.update",
        f"{VARIANT}.read",
        f"{VARIANT}.create",
        f"{VARIANT}.update",
        f"{MEDIA}.read",
        f"{MEDIA}.create",
        # Staff sell: they take, place, cancel, hand over and refund orders.
        f"{SALE_ORDER}.read",
        f"{SALE_ORDER}.create",
        f"{SALE_ORDER}.update",
        f"{SALE_ORDER}.place",
        f"{SALE_ORDER}.cancel",
        f"{SALE_ORDER}.fulfill",
        f"{SALE_ORDER}.refund",
    ],
    "CASHIER": [
        f"{MERCHANT}.read",
        f"{PRODUCT}.read",
        f"{VARIANT}.read",
        f"{MEDIA}.read",
        f"{SALE_ORDER}.read",
        f"{SALE_ORDER}.create",
        f"{SALE_ORDER}.place",
        f"{SALE_ORDER}.fulfill",
    ],
}


def run() -> None:
    policy_seed_role_permissions(source="commerce", baseline=BASELINE)
