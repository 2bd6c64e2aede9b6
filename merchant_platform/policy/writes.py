"""Policy writes: roles, permissions and memberships of one user, and their revocation. Each write
invalidates the cached grants it changes (merchant_platform.policy.cache)."""

from __future__ import annotations

from django.db import transaction

from merchant_platform.models import PolicyDefinition
from merchant_platform.policy.cache import invalidate_roles, invalidate_user
from merchant_platform.policy.loading import POLICY_DB
from merchant_platform.policy.matching import ANY, validate_role

USER = PolicyDefinition.SubjectType.USER


def _ensure(**fields) -> PolicyDefinition:
    row, _ = PolicyDefinition.objects.using(POLICY_DB).get_or_create(**fields)
    return row


def policy_grant_role(*, user_id: int, role: str, domain: str | int = ANY, source: str = "") -> PolicyDefinition:
    """Give `user_id` the role `role` in `domain` (idempotent)."""
    validate_role(role)
    with transaction.atomic(using=POLICY_DB):
        row = _ensure(kind=PolicyDefinition.Kind.ROLE, subject_type=USER, subject_id=str(user_id), role=role, domain=str(domain))
        if source and not row.source:
            row.source = source
            row.save(using=POLICY_DB, update_fields=["source", "updated_at"])
        invalidate_user(user_id)
    return row


def policy_grant_permission(
    *, user_id: int, resource: str, action: str, domain: str | int = ANY, effect: str = PolicyDefinition.Effect.ALLOW
) -> PolicyDefinition:
    """Allow (or deny) one user `resource.action` in `domain` (idempotent)."""
    with transaction.atomic(using=POLICY_DB):
        row = _ensure(
            kind=PolicyDefinition.Kind.PERMISSION,
            subject_type=PolicyDefinition.SubjectType.USER,
            subject_id=str(user_id),
            resource=resource,
            action=action,
            domain=str(domain),
            effect=effect,
        )
        invalidate_user(user_id)
    return row


def policy_join_domain(*, user_id: int, domain: str | int, source: str = "") -> PolicyDefinition:
    """Make `user_id` a member of tenant `domain`, e.g. when a user creates or joins a merchant."""
    if str(domain) == ANY:
        raise ValueError("a tenant membership names one merchant, not every domain")
    with transaction.atomic(using=POLICY_DB):
        row = _ensure(kind=PolicyDefinition.Kind.JOIN_DOMAIN, subject_type=USER, subject_id=str(user_id), domain=str(domain))
        if source and not row.source:
            row.source = source
            row.save(using=POLICY_DB, update_fields=["source", "updated_at"])
        invalidate_user(user_id)
    return row


def policy_revoke(*, policy_id: int) -> None:
    """Soft-delete one policy row and invalidate whoever it concerned."""
    with transaction.atomic(using=POLICY_DB):
        row = PolicyDefinition.objects.using(POLICY_DB).select_for_update().get(pk=policy_id)
        row.delete(using=POLICY_DB)
        if row.subject_type == PolicyDefinition.SubjectType.ROLE:
            invalidate_roles()
        else:
            invalidate_user(row.subject_id)


def policy_revoke_user(*, user_id: int, kind: str | None = None, role: str | None = None, domain: str | int | None = None) -> int:
    """Soft-delete a user's rows matching the filters (e.g. every role in a merchant); returns the count."""
    with transaction.atomic(using=POLICY_DB):
        rows = PolicyDefinition.objects.using(POLICY_DB).filter(subject_type=PolicyDefinition.SubjectType.USER, subject_id=str(user_id))
        if kind:
            rows = rows.filter(kind=kind)
        if role:
            rows = rows.filter(role=role)
        if domain is not None:
            rows = rows.filter(domain=str(domain))
        count = rows.delete()
        invalidate_user(user_id)
    return count
