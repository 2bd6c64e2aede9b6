"""Decisions about a request's principal: a user (its grants, read once per request) or a service
account (HTTP Basic, SERVICE_ACCOUNT_PERMISSIONS)."""

from __future__ import annotations

from django.conf import settings

from merchant_platform.errors import ApiError
from merchant_platform.logging import get_logger
from merchant_platform.policy.cache import grants_for
from merchant_platform.policy.matching import Grants, matches, parse_permission

log = get_logger(__name__)


def is_service(principal) -> bool:
    return bool(getattr(principal, "is_service", False))


class ServiceAccountForbidden(ApiError):
    status_code = 403
    default_code = "SERVICE_ACCOUNT_FORBIDDEN"
    default_detail = "This service account may not call this route or action."


def service_allows(principal, resource: str, action: str) -> bool:
    """May this service account (HTTP Basic) do `action` on `resource`? Only what
    SERVICE_ACCOUNT_PERMISSIONS lists for it (docs/authentication.md), in every tenant: a service
    acts for the merchants its own callers named, and checks them itself."""
    granted = settings.SERVICE_ACCOUNT_PERMISSIONS.get(getattr(principal, "username", ""), ())
    return any(matches(pattern, resource) and matches(verb, action) for pattern, verb in map(parse_permission, granted))


def require_service_permission(principal, resource: str, action: str) -> bool:
    """True when the service account may; else 403 SERVICE_ACCOUNT_FORBIDDEN (logged, without secrets)."""
    if service_allows(principal, resource, action):
        return True
    log.warning("authz.service_account_forbidden", account=principal.username, resource=resource, action=action)
    raise ServiceAccountForbidden()


def is_user(principal) -> bool:
    return bool(principal is not None and getattr(principal, "is_authenticated", False) and not is_service(principal))


def principal_grants(principal) -> Grants:
    """The grants of a request's user, read once per request."""
    memo = getattr(principal, "policy_memo", None)
    if memo is not None and "grants" in memo:
        return memo["grants"]
    grants = grants_for(int(principal.id))
    if memo is not None:
        memo["grants"] = grants
    return grants


def can(principal, resource: str, action: str, *, domain: str | int | None = None, owner_id: int | None = None) -> bool:
    """The decision for one record (its tenant `domain`, its `owner_id`) or for a resource without tenant."""
    if is_service(principal):
        return service_allows(principal, resource, action)
    if not is_user(principal):
        return False
    grants = principal_grants(principal)
    domain = None if domain is None else str(domain)
    if owner_id is not None and int(owner_id) == int(principal.id) and grants.owner_allows(resource, action, domain):
        return True
    return grants.allows(resource, action, domain)


def can_without_tenant(principal, resource: str, action: str, *, as_owner: bool = False) -> bool:
    """May the caller do `action` on a resource (or record) without tenant? A write needs a grant in
    `*`: a role or permission held everywhere, or (`as_owner`, for records it will own) OWNER's
    permission held everywhere. A tenant's admin is no administrator of the platform's catalogue."""
    if can(principal, resource, action):
        return True
    return as_owner and is_user(principal) and principal_grants(principal).owner_allows(resource, action)


def can_place(principal, resource: str, action: str, *, domain, tenanted: bool = True) -> bool:
    """May the caller put a record into tenant `domain` (a create, a move to another tenant, or a
    hand-over to another owner)? By the tenant's rules, never the owner rule: the record is not the
    caller's own there yet. A null tenant of a tenanted resource only for global administrators (a
    record out of every tenant is the platform's); a resource without tenant needs a grant in `*`."""
    if is_service(principal):
        return service_allows(principal, resource, action)
    if not is_user(principal):
        return False
    grants = principal_grants(principal)
    if domain is None:
        return grants.is_admin if tenanted else grants.allows(resource, action, None)
    return grants.allows(resource, action, str(domain))


def can_anywhere(principal, resource: str, action: str) -> bool:
    """May the caller do `action` on `resource` somewhere (in some tenant, or on its own records)?"""
    if is_service(principal):
        return service_allows(principal, resource, action)
    return is_user(principal) and principal_grants(principal).allows_anywhere(resource, action)
