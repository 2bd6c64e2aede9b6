"""Identity's seeds (idempotent): the role baselines for identity's own resources.

Accounts (identity.User) are for administrators only; a merchant's OWNER may read the policies of
the merchants it belongs to (identity.PolicyDefinition is scoped by its `domain`).
"""

from merchant_platform.policy import OWNER, policy_seed_role_permissions

BASELINE = {OWNER: ["identity.PolicyDefinition.read"]}


def run() -> dict[str, int]:
    return policy_seed_role_permissions(source="identity", baseline=BASELINE)
