"""Seeding: the role baselines each service owns (its `seeds.py` calls `policy_seed_role_permissions`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.db import transaction

from merchant_platform.models import PolicyDefinition
from merchant_platform.policy.cache import invalidate_roles
from merchant_platform.policy.loading import POLICY_DB
from merchant_platform.policy.matching import ANY, parse_permission, validate_role


def policy_seed_role_permissions(*, source: str, baseline: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Make the role baselines owned by `source` (a service) exactly `baseline` (idempotent).

    `baseline` maps a role to permissions, e.g. {"OWNER": ["finance.Account.read"], "CASHIER": [...]}.
    Rows the service seeded before and no longer lists are removed; rows others created are kept.
    Returns {"created": n, "removed": m}.
    """
    wanted = set()
    for role, granted in baseline.items():
        validate_role(role)
        for permission in granted:
            wanted.add((role, *parse_permission(permission)))
    created = removed = 0
    with transaction.atomic(using=POLICY_DB):
        existing = PolicyDefinition.objects.using(POLICY_DB).filter(
            kind=PolicyDefinition.Kind.PERMISSION, subject_type=PolicyDefinition.SubjectType.ROLE, source=source
        )
        present = {}
        for row in existing:
            present[(row.subject_id, row.resource, row.action)] = row
        for key, row in present.items():
            if key not in wanted:
                row.delete(using=POLICY_DB)
                removed += 1
        for role, resource, action in sorted(wanted - present.keys()):
            _, made = PolicyDefinition.objects.using(POLICY_DB).get_or_create(
                kind=PolicyDefinition.Kind.PERMISSION,
                subject_type=PolicyDefinition.SubjectType.ROLE,
                subject_id=role,
                resource=resource,
                action=action,
                domain=ANY,
                effect=PolicyDefinition.Effect.ALLOW,
                defaults={"source": source},
            )
            created += made
        if created or removed:
            invalidate_roles()
    return {"created": created, "removed": removed}
