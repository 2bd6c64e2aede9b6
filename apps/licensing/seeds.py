"""Licensing's seeds: the free-trial policy and the baseline role permissions (spec 1.2.2 and 9).

The permission grants come in three slices, each delivered by the migration of the same number
(0001, 0003 and 0004, spec 9); `run()` (RUN_MODE=migrate, `manage.py seed`) re-applies all of them.
Both are idempotent: the kernel's `policy_seed_role_permissions` makes licensing's role rows exactly
the listed baseline, and the free-trial policy is created once (an operator's later edits are kept).

SUPER_ADMIN and ADMIN reach everything through the policy engine; the grants below are the baseline
of the other roles. OWNER's grants apply to the records it owns (the views scope them).
"""

from __future__ import annotations

from django.db import transaction

from apps.licensing.models import Policy
from merchant_platform.policy import CASHIER, EMPLOYEE, OWNER, policy_seed_role_permissions

DB = "licensing"
SOURCE = "licensing"

LICENSE, ACTIVATION, POLICY = "licensing.License", "licensing.Activation", "licensing.Policy"

# migration number -> the role grants it adds (role -> permissions); each migration seeds the
# baseline up to its own number, so the role baselines follow the migration history exactly.
PERMISSION_SEEDS: dict[str, dict[str, tuple[str, ...]]] = {
    # Reading licenses, their seats and the policies they come from.
    "0001": {
        OWNER: (f"{LICENSE}.read", f"{ACTIVATION}.read", f"{POLICY}.read"),
        EMPLOYEE: (f"{LICENSE}.read", f"{ACTIVATION}.read", f"{POLICY}.read"),
        CASHIER: (f"{LICENSE}.read",),
    },
    # Validation by fingerprint: every role that runs a point of sale checks its license.
    "0003": {
        OWNER: (f"{LICENSE}.validate",),
        EMPLOYEE: (f"{LICENSE}.validate",),
        CASHIER: (f"{LICENSE}.validate",),
    },
    # Seats: an owner frees the seat of a retired machine, or all of them; other actions stay with admins.
    "0004": {
        OWNER: (f"{ACTIVATION}.delete", f"{LICENSE}.deactivate"),
    },
}

FREE_TRIAL = {
    "name": "Free trial",
    "duration_seconds": 14 * 24 * 3600,
    "activation_limit": 1,
    "entitlements": [],
    "is_trial": True,
}


def baseline_through(migration: str) -> dict[str, list[str]]:
    """The role baseline as of `migration`: every slice up to and including it."""
    baseline: dict[str, list[str]] = {}
    for number, slice_ in sorted(PERMISSION_SEEDS.items()):
        if number > migration:
            break
        for role, permissions in slice_.items():
            baseline.setdefault(role, []).extend(permissions)
    return baseline


def seed_permissions(migration: str = max(PERMISSION_SEEDS)) -> dict[str, int]:
    """Make licensing's role baseline the one of `migration` (default: the latest)."""
    return policy_seed_role_permissions(source=SOURCE, baseline=baseline_through(migration))


def seed_free_trial_policy(*, policy_model=Policy) -> None:
    """The free-trial policy new licenses get by default; an operator's later edits are kept."""
    policies = policy_model._base_manager.db_manager(DB)
    with transaction.atomic(using=DB):
        if policies.filter(code=Policy.FREE_TRIAL_CODE).update(deleted_at=None) == 0:
            policies.create(code=Policy.FREE_TRIAL_CODE, **FREE_TRIAL)


def run() -> None:
    seed_permissions()
    seed_free_trial_policy()
