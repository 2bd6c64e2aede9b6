"""Grant loading: a user's `Grants` read from the policy store (`PolicyDefinition` rows in PostgreSQL)."""

from __future__ import annotations

from merchant_platform.models import PolicyDefinition
from merchant_platform.policy.matching import ANY, FULL_ACCESS_ROLES, Grants, Rule

POLICY_DB = "default"
# The `source` of the membership commerce writes when a user creates a merchant: the creator's.
MERCHANT_CREATE_SOURCE = "commerce"


def load_grants(user_id: int) -> Grants:
    """Read a user's grants from the policy store (PostgreSQL), bypassing the cache."""
    own = list(PolicyDefinition.objects.using(POLICY_DB).filter(subject_type=PolicyDefinition.SubjectType.USER, subject_id=str(user_id)))
    roles = {(row.role, row.domain) for row in own if row.kind == PolicyDefinition.Kind.ROLE}
    rules = [Rule(row.resource, row.action, row.domain, row.effect, "user") for row in own if row.kind == PolicyDefinition.Kind.PERMISSION]
    memberships = [row for row in own if row.kind == PolicyDefinition.Kind.JOIN_DOMAIN]
    domains = {row.domain for row in memberships}
    created = {row.domain for row in memberships if row.source == MERCHANT_CREATE_SOURCE}
    domains |= {domain for _, domain in roles if domain != ANY}
    for role, domain in roles:
        if role in FULL_ACCESS_ROLES and domain != ANY:
            rules.append(Rule(ANY, ANY, domain, PolicyDefinition.Effect.ALLOW, role))
    role_names = {role for role, _ in roles}
    if role_names:
        baseline = PolicyDefinition.objects.using(POLICY_DB).filter(
            kind=PolicyDefinition.Kind.PERMISSION, subject_type=PolicyDefinition.SubjectType.ROLE, subject_id__in=role_names
        )
        for row in baseline:
            for role, held_in in roles:
                if role != row.subject_id:
                    continue
                if held_in == ANY:
                    rules.append(Rule(row.resource, row.action, row.domain, row.effect, role, via_everywhere=True))
                elif row.domain in (ANY, held_in):
                    rules.append(Rule(row.resource, row.action, held_in, row.effect, role))
    return Grants(
        user_id=user_id, roles=frozenset(roles), rules=tuple(dict.fromkeys(rules)), domains=frozenset(domains), created=frozenset(created)
    )
