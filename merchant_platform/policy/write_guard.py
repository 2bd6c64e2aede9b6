"""The write guard: a write that moves a record to another tenant or hands it to another owner needs
the permission in the target tenant too (`check_changes`)."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import models
from rest_framework import exceptions

from merchant_platform.policy.decisions import can_place, is_service, is_user, principal_grants, service_allows
from merchant_platform.policy.matching import UPDATE


def record_tenant(obj, tenant_field: str | None):
    if not tenant_field:
        return None
    value = obj
    for part in tenant_field.split("__"):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value.pk if isinstance(value, models.Model) else value


_UNRESOLVED = object()


def _change_of(instance, changes: Mapping, field_path: str | None):
    """(True, new value) when `changes` (validated data keyed by model field) changes what
    `field_path` reads on `instance`; the new value is `_UNRESOLVED` when it cannot be followed
    (a raw id where the path goes through a relation)."""
    if not field_path:
        return False, None
    head, _, rest = field_path.partition("__")
    if head not in changes:
        return False, None
    new = changes[head]
    if isinstance(new, models.Model):
        new = record_tenant(new, rest) if rest else new.pk
    elif rest and new is not None:
        return True, _UNRESOLVED
    old = record_tenant(instance, field_path)
    return (None if new is None else str(new)) != (None if old is None else str(old)), new


def check_changes(
    principal, resource: str, instance, changes: Mapping, *, tenant_field=None, owner_field=None, action: str = UPDATE
) -> None:
    """Raise 403 unless the caller may make this write's tenant and owner changes: moving a record
    to another tenant (or to none) or handing it to another owner needs `action` in the target
    tenant by the tenant's rules (`can_place`), on top of `action` on the record where it is."""
    moved, target = _change_of(instance, changes, tenant_field)
    handed, _ = _change_of(instance, changes, owner_field)
    if not (moved or handed):
        return
    domain = target if moved else record_tenant(instance, tenant_field)
    if domain is _UNRESOLVED:
        if is_service(principal):
            allowed = service_allows(principal, resource, action)
        else:
            allowed = is_user(principal) and principal_grants(principal).is_admin
    else:
        allowed = can_place(principal, resource, action, domain=domain, tenanted=bool(tenant_field))
    if not allowed:
        raise exceptions.PermissionDenied("Your policies do not allow moving this record to that tenant or owner.")
