"""Taxation's seeds: the baseline role permissions (spec 1.2.2 and 9). SUPER_ADMIN and ADMIN reach
everything through the policy engine; the grants below are the baseline of the other roles, in the
merchants where they hold the role. Idempotent (`policy_seed_role_permissions`)."""

from __future__ import annotations

from merchant_platform.policy import CASHIER, EMPLOYEE, OWNER, policy_seed_role_permissions

SOURCE = "taxation"

TAX_GROUP, TAX_SET, ROUNDING_POLICY, QUOTE = "taxation.TaxGroup", "taxation.TaxSet", "taxation.RoundingPolicy", "taxation.Quote"

READ_ALL = (f"{TAX_GROUP}.read", f"{TAX_SET}.read", f"{ROUNDING_POLICY}.read")

BASELINE: dict[str, tuple[str, ...]] = {
    # The owner runs the merchant's taxes; staff read them; everyone who sells asks for quotes.
    OWNER: (
        *READ_ALL,
        f"{TAX_GROUP}.create",
        f"{TAX_GROUP}.update",
        f"{TAX_GROUP}.delete",
        f"{TAX_SET}.provision",
        f"{TAX_SET}.deprovision",
        f"{QUOTE}.create",
    ),
    EMPLOYEE: (*READ_ALL, f"{QUOTE}.create"),
    CASHIER: (f"{QUOTE}.create",),
}


def seed_permissions() -> dict[str, int]:
    return policy_seed_role_permissions(source=SOURCE, baseline={role: list(grants) for role, grants in BASELINE.items()})


def run() -> None:
    seed_permissions()
