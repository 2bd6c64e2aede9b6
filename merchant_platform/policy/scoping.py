"""Queryset scoping: only the rows the caller may read (or act on)."""

from __future__ import annotations

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured, ValidationError
from django.db import models
from django.db.models import Q

from merchant_platform.policy.decisions import is_service, is_user, principal_grants, service_allows
from merchant_platform.policy.matching import OWNER, READ


def _final_field(model: type[models.Model], lookup: str) -> models.Field:
    field = None
    for part in lookup.split("__"):
        field = model._meta.get_field(part)
        if field.is_relation and field.related_model is not None:
            model = field.related_model
            field = field.target_field if hasattr(field, "target_field") else model._meta.pk
    return field


def _domain_values(model: type[models.Model], tenant_field: str, domains: list[str]) -> list:
    try:
        field = _final_field(model, tenant_field)
    except FieldDoesNotExist:
        raise ImproperlyConfigured(f"{model.__name__} has no field {tenant_field!r} (the view's policy_tenant_field)") from None
    values = []
    for domain in domains:
        try:
            values.append(field.to_python(domain))
        except (ValidationError, ValueError, TypeError):
            continue  # a domain that cannot be a value of this field matches no row
    return values


def scope_queryset(
    queryset: models.QuerySet,
    principal,
    resource: str,
    *,
    action: str = READ,
    tenant_field: str | None = None,
    owner_field: str | None = None,
) -> models.QuerySet:
    """Only the rows the caller may `action`: every row for admins and for the service accounts
    allowed `action`; rows of the tenants where the caller holds the permission; its own rows
    (owner_field) for OWNER; else none."""
    if is_service(principal):
        return queryset if service_allows(principal, resource, action) else queryset.none()
    if not is_user(principal):
        return queryset.none()
    grants = principal_grants(principal)
    if grants.is_admin:
        return queryset
    condition = Q()
    matched = False
    if tenant_field:
        values = _domain_values(queryset.model, tenant_field, grants.domains_allowing(resource, action))
        if values:
            condition |= Q(**{f"{tenant_field}__in": values})
            matched = True
    elif grants.allows(resource, action, None):
        return queryset
    if owner_field and grants.has_role(OWNER):
        # Own records without tenant, and own records of the tenants where the owner rule holds.
        owned = (Q(**{f"{tenant_field}__isnull": True}) if tenant_field else Q()) if grants.owner_allows(resource, action) else None
        if tenant_field:
            domains = [domain for domain in sorted(grants.domains) if grants.owner_allows(resource, action, domain)]
            values = _domain_values(queryset.model, tenant_field, domains)
            if values:
                in_tenants = Q(**{f"{tenant_field}__in": values})
                owned = in_tenants if owned is None else owned | in_tenants
        if owned is not None:
            condition |= Q(**{owner_field: principal.id}) & owned
            matched = True
    return queryset.filter(condition) if matched else queryset.none()
