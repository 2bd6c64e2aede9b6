"""The DRF layer: `PolicyPermission`, `PolicyScopedMixin` and `IsServicePrincipal`.

How a view declares its resource, tenant and owner fields: docs/authentication.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured
from django.db import models
from rest_framework import exceptions, permissions

from merchant_platform.policy.decisions import (
    can,
    can_anywhere,
    can_place,
    can_without_tenant,
    is_service,
    is_user,
    require_service_permission,
)
from merchant_platform.policy.matching import CREATE, DELETE, READ, UPDATE
from merchant_platform.policy.scoping import scope_queryset
from merchant_platform.policy.write_guard import check_changes, record_tenant
from merchant_platform.serializers import WRITE_GUARD

# DRF view actions -> policy actions; any other (custom) view action is its own policy action.
VIEW_ACTIONS = {
    "list": READ,
    "retrieve": READ,
    "metadata": READ,
    "create": CREATE,
    "update": UPDATE,
    "partial_update": UPDATE,
    "destroy": DELETE,
}
METHOD_ACTIONS = {"GET": READ, "HEAD": READ, "OPTIONS": READ, "POST": CREATE, "PUT": UPDATE, "PATCH": UPDATE, "DELETE": DELETE}


def _view_policy(view) -> tuple[str, str | None, str | None]:
    resource = getattr(view, "policy_resource", None)
    if not resource:
        raise ImproperlyConfigured(f"{type(view).__name__} uses PolicyPermission but declares no policy_resource")
    return resource, getattr(view, "policy_tenant_field", None), getattr(view, "policy_owner_field", None)


def policy_action(view, request) -> str:
    """The policy action of this request: `policy_actions[view.action]`, the CRUD mapping, or the
    custom action's own name; for plain APIViews, the HTTP method."""
    view_action = getattr(view, "action", None)
    overrides = getattr(view, "policy_actions", None) or {}
    if view_action:
        return overrides.get(view_action) or VIEW_ACTIONS.get(view_action, view_action)
    return overrides.get(request.method) or METHOD_ACTIONS.get(request.method, request.method.lower())


def _is_detail(view) -> bool:
    detail = getattr(view, "detail", None)
    if detail is not None:
        return bool(detail)
    lookup = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None)
    return bool(lookup and lookup in getattr(view, "kwargs", {}))


class PolicyPermission(permissions.BasePermission):
    """Views declare `policy_resource` (e.g. "finance.Account"), and optionally `policy_tenant_field`
    (e.g. "merchant_id"), `policy_owner_field` (e.g. "created_by") and `policy_actions`.

    Lists and single reads always pass here: what is visible is decided by the queryset scope
    (`PolicyScopedMixin`), so a list is empty rather than forbidden and a record of another tenant
    is a 404. Collection writes need the permission somewhere; record writes need it on the record
    (403 when the record is visible but the action is not allowed).
    """

    message = "Your policies do not allow this action."

    def has_permission(self, request, view):
        user = request.user
        if not getattr(user, "is_authenticated", False):
            return False
        resource, tenant_field, owner_field = _view_policy(view)
        action = policy_action(view, request)
        if is_service(user):
            return require_service_permission(user, resource, action)
        if action == READ or _is_detail(view):
            return True
        if not tenant_field:  # a resource without tenant: writes need a grant in `*`
            return can_without_tenant(user, resource, action, as_owner=bool(owner_field))
        return can_anywhere(user, resource, action)

    def has_object_permission(self, request, view, obj):
        user = request.user
        if is_service(user):
            return True  # has_permission checked the account's route and action
        resource, tenant_field, owner_field = _view_policy(view)
        domain = record_tenant(obj, tenant_field)
        owner_id = record_tenant(obj, owner_field)  # follows "license__owner_id" like the tenant field
        if not can(user, resource, READ, domain=domain, owner_id=owner_id):
            raise exceptions.NotFound()  # another tenant's record does not exist for this caller
        action = policy_action(view, request)
        return action == READ or can(user, resource, action, domain=domain, owner_id=owner_id)


class PolicyScopedMixin:
    """For generic views and viewsets: the queryset holds only what the caller may read, and
    `perform_create` checks the create permission in the new record's tenant and records its owner."""

    policy_resource: str
    policy_tenant_field: str | None = None
    policy_owner_field: str | None = None
    policy_actions: dict[str, str] = {}

    def get_queryset(self):
        resource, tenant_field, owner_field = _view_policy(self)
        return scope_queryset(super().get_queryset(), self.request.user, resource, tenant_field=tenant_field, owner_field=owner_field)

    def authorize(self, action: str, *, domain=None, owner_id=None) -> None:
        """Raise 403 unless the caller may `action` in `domain` (or as the record's owner)."""
        if not can(self.request.user, self.policy_resource, action, domain=domain, owner_id=owner_id):
            raise exceptions.PermissionDenied(PolicyPermission.message)

    def authorize_placement(self, action: str, *, domain) -> None:
        """Raise 403 unless the caller may put a record into tenant `domain` (`can_place`): a create
        in that tenant; a null tenant only for global administrators."""
        if not can_place(self.request.user, self.policy_resource, action, domain=domain, tenanted=bool(self.policy_tenant_field)):
            raise exceptions.PermissionDenied(PolicyPermission.message)

    def authorize_changes(self, instance, changes: Mapping, *, action: str = UPDATE) -> None:
        """Raise 403 unless the caller may make the tenant and owner changes of `changes` (validated
        data keyed by model field) to `instance` (`check_changes`). Runs by itself for the kernel's
        serializers built with `get_serializer` (their `is_valid` calls it); a view that validates
        its own way calls it before the service write."""
        resource, tenant_field, owner_field = _view_policy(self)
        check_changes(self.request.user, resource, instance, changes, tenant_field=tenant_field, owner_field=owner_field, action=action)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), WRITE_GUARD: self.authorize_changes}

    def policy_create_kwargs(self, validated_data: Mapping) -> dict:
        """Check the create permission in the new record's tenant; return the owner to record."""
        resource, tenant_field, owner_field = _view_policy(self)
        user = self.request.user
        if tenant_field:
            domain = validated_data.get(tenant_field.split("__")[0])
            if isinstance(domain, models.Model):
                domain = record_tenant(domain, tenant_field.partition("__")[2]) if "__" in tenant_field else domain.pk
            self.authorize_placement(CREATE, domain=domain)
        elif not can_without_tenant(user, resource, CREATE, as_owner=bool(owner_field)):
            raise exceptions.PermissionDenied(PolicyPermission.message)
        return {owner_field: user.id} if owner_field and is_user(user) else {}

    def perform_create(self, serializer):
        serializer.save(**self.policy_create_kwargs(serializer.validated_data))


def route_resource(view) -> str:
    """The resource a route stands for: its `policy_resource`, else `<service>.<view name>` (e.g.
    inventory's ReservationViewSet is "inventory.Reservation"), for the service accounts' table."""
    declared = getattr(view, "policy_resource", None)
    if declared:
        return declared
    service = type(view).__module__.split(".")[1]
    return f"{service}.{type(view).__name__.removesuffix('ViewSet').removesuffix('View')}"


class IsServicePrincipal(permissions.BasePermission):
    """Only service-to-service callers (HTTP Basic) whose account may call this route and action
    (`route_resource`, `policy_action`): internal endpoints, never reachable with a user token."""

    message = "This endpoint is for platform services only."

    def has_permission(self, request, view):
        if not is_service(request.user):
            return False
        return require_service_permission(request.user, route_resource(view), policy_action(view, request))
