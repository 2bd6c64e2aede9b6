"""The policy engine (spec 5) and the one DRF permission and queryset layer every service uses.

Policies are `PolicyDefinition` rows in the shared `public` schema (merchant_platform.models):

- ROLE rows give a user a role in a domain (a merchant id, or "*" for everywhere). SUPER_ADMIN and
  ADMIN have full access (in their domain); OWNER reaches the records it created (`created_by`);
  EMPLOYEE and CASHIER get what their PERMISSION rows (seeded baselines, or per user) say. In a
  tenant where the user holds a role of its own, that role decides: the allows of a role held in
  `*` add nothing there but the owner rule. The same in a tenant the user only joined as a plain
  member: a role held in `*` keeps its baseline only in the tenants the user created (see JOIN_DOMAIN).
- PERMISSION rows allow or deny `resource.action` to a user or to every holder of a role, in a
  domain. A deny wins over an allow.
- JOIN_DOMAIN rows make a user a member of a tenant. Tenant-scoped records are visible only in the
  tenants the user belongs to (holding a role in a domain also makes the user a member), whatever
  the permissions say: that is finance's tenant isolation. The membership written by a merchant's
  creation carries `source` MERCHANT_CREATE_SOURCE (commerce's, which every existing creator
  membership already has); identity's policy API leaves `source` empty and read-only, so no user's
  request can make a membership a creator's.

Nothing granted means nothing visible: lists come back empty and a single record answers 404.

A user's policies (their "grants") are cached in Redis under versioned keys; every write bumps the
user's version (or the version of every role baseline) after commit, so the next request sees the
change. When Redis is down the cache is skipped and the grants are read from PostgreSQL. A cached
entry is JSON with an HMAC (a key derived from APP_ENV_APPLICATION_SECRET) over the user, the
versions, its expiry and the grants: an entry written by anyone else is dropped, not served.

How a view declares its resource, tenant and owner fields: docs/authentication.md.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache, caches
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured, ValidationError
from django.db import models, transaction
from django.db.models import Q
from django_redis import get_redis_connection
from rest_framework import exceptions, permissions

from merchant_platform import crypto
from merchant_platform.errors import ApiError
from merchant_platform.logging import get_logger
from merchant_platform.models import PolicyDefinition
from merchant_platform.registry import redis_optional
from merchant_platform.serializers import WRITE_GUARD

log = get_logger(__name__)

SUPER_ADMIN, ADMIN, OWNER, EMPLOYEE, CASHIER = "SUPER_ADMIN", "ADMIN", "OWNER", "EMPLOYEE", "CASHIER"
ROLES = (SUPER_ADMIN, ADMIN, OWNER, EMPLOYEE, CASHIER)
FULL_ACCESS_ROLES = frozenset({SUPER_ADMIN, ADMIN})
ANY = "*"
POLICY_DB = "default"
USER = PolicyDefinition.SubjectType.USER

READ, CREATE, UPDATE, DELETE = "read", "create", "update", "delete"
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

_CACHE_PREFIX = "authz"
_ROLES_VERSION_KEY = f"{_CACHE_PREFIX}:version:roles"
# After a Redis failure the cache is skipped for this long, so an outage costs one timeout, not one per request.
_CACHE_RETRY_AFTER_SECONDS = 5.0
_cache_state = {"down_until": 0.0}
# Cached grants carry an HMAC under a key derived from APP_ENV_APPLICATION_SECRET for this purpose.
# (v3: grants name the tenants the user created; entries of an older shape are dropped).
_GRANTS_MAC_PURPOSE = "authz-grants-v3"
# The `source` of the membership commerce writes when a user creates a merchant: the creator's.
MERCHANT_CREATE_SOURCE = "commerce"


# --- Matching -------------------------------------------------------------------------------------


def _matches(pattern: str, value: str) -> bool:
    """`*` matches anything; `finance.*` matches every finance resource."""
    return pattern in (ANY, value) or (pattern.endswith(".*") and value.startswith(pattern[:-1]))


@dataclass(frozen=True)
class Rule:
    resource: str
    action: str
    domain: str
    effect: str
    via: str  # "user" or the role name the rule came from
    via_everywhere: bool = False  # from the baseline of a role held in `*`

    def applies(self, resource: str, action: str, domain: str | None) -> bool:
        in_domain = self.domain == ANY if domain is None else self.domain in (ANY, domain)
        return in_domain and _matches(self.resource, resource) and _matches(self.action, action)


@dataclass(frozen=True)
class Grants:
    """Everything the policy store says about one user, in a form that is cheap to evaluate."""

    user_id: int
    roles: frozenset[tuple[str, str]]  # (role, domain)
    rules: tuple[Rule, ...]
    domains: frozenset[str]  # tenants the user belongs to
    created: frozenset[str] = frozenset()  # tenants the user joined by creating them

    @property
    def is_admin(self) -> bool:
        """SUPER_ADMIN or ADMIN everywhere: full access."""
        return any(role in FULL_ACCESS_ROLES and domain == ANY for role, domain in self.roles)

    def has_role(self, role: str, domain: str | None = None) -> bool:
        return any(r == role and (domain is None or d in (ANY, domain)) for r, d in self.roles)

    def holds_role_in(self, domain: str) -> bool:
        """Does the user hold a role of its own in tenant `domain` (not one held everywhere)?"""
        return any(held_in == domain for _, held_in in self.roles)

    def role_everywhere_applies_in(self, domain: str) -> bool:
        """Does the baseline of a role held in `*` reach tenant `domain`? Only in a merchant the user
        created and holds no role of its own in; elsewhere such a role gives only the owner rule."""
        return domain in self.created and not self.holds_role_in(domain)

    def allows(self, resource: str, action: str, domain: str | None = None) -> bool:
        """May the user do `action` on `resource` in tenant `domain` (None: a resource without tenant)?"""
        if self.is_admin:
            return True
        if domain is not None and domain not in self.domains:
            return False
        # OWNER's rules are about the records one owns (owner_allows), even when the role is held
        # everywhere: on a resource without tenant they are no global permission.
        matching = [rule for rule in self.rules if rule.applies(resource, action, domain) and not (domain is None and rule.via == OWNER)]
        if any(rule.effect == PolicyDefinition.Effect.DENY for rule in matching):
            return False
        if domain is not None and not self.role_everywhere_applies_in(domain):
            # Where the user holds a role of its own (a seller made CASHIER of another merchant), that
            # role decides; where it is a plain member (not the creator), its own grants do: an allow
            # of a role held everywhere adds nothing there but the owner rule.
            matching = [rule for rule in matching if not rule.via_everywhere]
        return any(rule.effect == PolicyDefinition.Effect.ALLOW for rule in matching)

    def domains_allowing(self, resource: str, action: str) -> list[str]:
        return sorted(domain for domain in self.domains if self.allows(resource, action, domain))

    def allows_anywhere(self, resource: str, action: str) -> bool:
        return self.allows(resource, action, None) or bool(self.domains_allowing(resource, action)) or self.owner_allows(resource, action)

    def denies(self, resource: str, action: str, domain: str) -> bool:
        """Does a deny rule of tenant `domain` (or of every domain) cover `resource.action`?"""
        return any(rule.effect == PolicyDefinition.Effect.DENY and rule.applies(resource, action, domain) for rule in self.rules)

    def owner_allows(self, resource: str, action: str, domain: str | None = None) -> bool:
        """OWNER reaches its own records for what the OWNER role's permissions allow. A record of a
        tenant (`domain`) only when the user belongs to that tenant and no deny there covers the
        action: the tenant rules come first, as everywhere else."""
        if not self.has_role(OWNER):
            return False
        if domain is not None and (domain not in self.domains or self.denies(resource, action, domain)):
            return False
        matching = [r for r in self.rules if r.via in (OWNER, "user") and _matches(r.resource, resource) and _matches(r.action, action)]
        owner_rules = [r for r in matching if r.via == OWNER]
        if domain is None and action != READ:
            # A write to a record without tenant needs a grant in `*`: OWNER held everywhere.
            owner_rules = [r for r in owner_rules if r.domain == ANY]
        denied = any(r.effect == PolicyDefinition.Effect.DENY and r.domain == ANY for r in matching)
        return not denied and any(r.effect == PolicyDefinition.Effect.ALLOW for r in owner_rules)

    def to_json(self) -> str:
        return json.dumps(
            {
                "roles": sorted(self.roles),
                "rules": [[r.resource, r.action, r.domain, r.effect, r.via, r.via_everywhere] for r in self.rules],
                "domains": sorted(self.domains),
                "created": sorted(self.created),
            }
        )

    @classmethod
    def from_json(cls, user_id: int, raw: str | bytes) -> Grants:
        data = json.loads(raw)
        return cls(
            user_id=user_id,
            roles=frozenset(tuple(item) for item in data["roles"]),
            rules=tuple(Rule(*item) for item in data["rules"]),
            domains=frozenset(data["domains"]),
            created=frozenset(data["created"]),
        )


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


# --- The cache ------------------------------------------------------------------------------------


def _user_version_key(user_id: int | str) -> str:
    return f"{_CACHE_PREFIX}:version:user:{user_id}"


def _cache_usable() -> bool:
    return time.monotonic() >= _cache_state["down_until"]


def _cache_failed(exc: Exception) -> None:
    _cache_state["down_until"] = time.monotonic() + _CACHE_RETRY_AFTER_SECONDS
    log.warning("authz.cache_unavailable", error=type(exc).__name__)


def _grants_key(user_id: int) -> str:
    return f"{_CACHE_PREFIX}:grants:{user_id}"


def _redis():
    """The cache's Redis client, used raw: what this module reads back is JSON it authenticates
    itself, never a pickle (django-redis unpickles whatever a key holds)."""
    return get_redis_connection("default")


def _entry_data(user_id: int, versions: tuple[str, str], until: int, grants: str) -> bytes:
    """What a cached entry's MAC covers: the user (an entry cannot move to another user's key), the
    versions, the end of its lifetime (an old entry cannot be replayed forever) and the grants."""
    return f"{user_id}\n{versions[0]}\n{versions[1]}\n{until}\n{grants}".encode()


def _authentic_grants(user_id: int, raw: bytes | None, current: tuple[str, str]) -> str | None:
    """The grants of a cached entry if it is well formed, stored under the current versions, not
    past its lifetime and carries a valid MAC; else None."""
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
        versions, until, grants, tag = (entry["user"], entry["roles"]), entry["until"], entry["grants"], entry["mac"]
    except (ValueError, TypeError, KeyError):
        return None
    if versions != current or not isinstance(until, int) or not isinstance(grants, str) or until < time.time():
        return None
    return grants if crypto.mac_verifies(_entry_data(user_id, versions, until, grants), tag, purpose=_GRANTS_MAC_PURPOSE) else None


def _read_cached(user_id: int) -> tuple[str | None, tuple[str, str]]:
    """One round trip: the cached entry (if it was stored under the current versions and its MAC
    holds) and the current versions of the user's policies and of the role baselines."""
    redis = _redis()
    names = [cache.make_key(key) for key in (_grants_key(user_id), _user_version_key(user_id), _ROLES_VERSION_KEY)]
    raw, *found = redis.mget(names)
    versions = []
    for name, stored in zip(names[1:], found, strict=True):
        value = stored
        if value is None:
            # No version yet (or evicted): start a fresh one, so nothing cached before can be served.
            redis.set(name, uuid.uuid4().hex, nx=True)
            value = redis.get(name)
        versions.append(value.decode() if isinstance(value, bytes) else str(value))
    current = (versions[0], versions[1])
    grants = _authentic_grants(user_id, raw, current)
    if raw is not None and grants is None:
        redis.delete(names[0])  # stale, expired or forged: never served, and not kept
    return grants, current


def grants_for(user_id: int) -> Grants:
    """A user's grants: from Redis when cached under the current versions with a valid MAC, else
    from PostgreSQL (and then cached, tagged with the versions read before the rows: a write in
    between bumps a version, so such an entry is never served). Without an application secret
    nothing is cached: Redis alone cannot vouch for a permission."""
    if not settings.APP_ENV_APPLICATION_SECRET:
        return load_grants(user_id)
    if not _cache_usable():
        return _grants_without_redis(user_id)
    try:
        raw, versions = _read_cached(user_id)
    except Exception as exc:  # Redis down: decide from PostgreSQL (spec 7, the auth cache is off)
        _cache_failed(exc)
        return _grants_without_redis(user_id)
    if raw is not None:
        return Grants.from_json(user_id, raw)
    grants = load_grants(user_id)
    try:
        serialized = grants.to_json()
        until = int(time.time()) + settings.AUTHZ_CACHE_TTL_SECONDS
        tag = crypto.mac(_entry_data(user_id, versions, until, serialized), purpose=_GRANTS_MAC_PURPOSE)
        entry = {"user": versions[0], "roles": versions[1], "until": until, "grants": serialized, "mac": tag}
        _redis().set(cache.make_key(_grants_key(user_id)), json.dumps(entry), ex=settings.AUTHZ_CACHE_TTL_SECONDS)
    except Exception as exc:
        _cache_failed(exc)
    return grants


def _grants_without_redis(user_id: int) -> Grants:
    """While Redis is down: from PostgreSQL, and in a process that runs without Redis (inventory,
    spec 1.3) kept in process for AUTHZ_LOCAL_CACHE_TTL_SECONDS. With no shared version to bump, a
    change made in another process reaches this one only when the entry runs out: hence the short
    lifetime; a change made in this process clears the entries at once (_invalidate)."""
    if not redis_optional():
        return load_grants(user_id)
    local = caches["local"]
    grants = local.get(_grants_key(user_id))
    if grants is None:
        grants = load_grants(user_id)
        local.set(_grants_key(user_id), grants, timeout=settings.AUTHZ_LOCAL_CACHE_TTL_SECONDS)
    return grants


def _bump(keys: Iterable[str]) -> None:
    try:
        redis = _redis().pipeline(transaction=False)
        for key in keys:
            redis.set(cache.make_key(key), uuid.uuid4().hex)
        redis.execute()
    except Exception as exc:  # cached grants then expire after AUTHZ_CACHE_TTL_SECONDS
        _cache_failed(exc)


def _invalidate(key: str) -> None:
    # Bumped now and again after the commit: a request that read the old rows between the two
    # cached them under a version that the second bump retires.
    caches["local"].clear()
    _bump([key])
    transaction.on_commit(lambda: _bump([key]), using=POLICY_DB)


def invalidate_user(user_id: int | str) -> None:
    """Make the next request of this user re-read its policies."""
    _invalidate(_user_version_key(user_id))


def invalidate_roles() -> None:
    """Make every user re-read the role baselines."""
    _invalidate(_ROLES_VERSION_KEY)


# --- Writes ---------------------------------------------------------------------------------------


def _validate_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")


def _ensure(**fields) -> PolicyDefinition:
    row, _ = PolicyDefinition.objects.using(POLICY_DB).get_or_create(**fields)
    return row


def policy_grant_role(*, user_id: int, role: str, domain: str | int = ANY, source: str = "") -> PolicyDefinition:
    """Give `user_id` the role `role` in `domain` (idempotent)."""
    _validate_role(role)
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


def parse_permission(permission: str) -> tuple[str, str]:
    """ "finance.Account.read" -> ("finance.Account", "read"); "*" -> ("*", "*")."""
    if permission == ANY:
        return ANY, ANY
    resource, dot, action = permission.rpartition(".")
    if not dot or not resource or not action:
        raise ValueError(f"a permission is `<resource>.<action>`, got {permission!r}")
    return resource, action


def policy_seed_role_permissions(*, source: str, baseline: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Make the role baselines owned by `source` (a service) exactly `baseline` (idempotent).

    `baseline` maps a role to permissions, e.g. {"OWNER": ["finance.Account.read"], "CASHIER": [...]}.
    Rows the service seeded before and no longer lists are removed; rows others created are kept.
    Returns {"created": n, "removed": m}.
    """
    wanted = set()
    for role, granted in baseline.items():
        _validate_role(role)
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


# --- Decisions ------------------------------------------------------------------------------------


def _is_service(principal) -> bool:
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
    return any(_matches(pattern, resource) and _matches(verb, action) for pattern, verb in map(parse_permission, granted))


def require_service_permission(principal, resource: str, action: str) -> bool:
    """True when the service account may; else 403 SERVICE_ACCOUNT_FORBIDDEN (logged, without secrets)."""
    if service_allows(principal, resource, action):
        return True
    log.warning("authz.service_account_forbidden", account=principal.username, resource=resource, action=action)
    raise ServiceAccountForbidden()


def _is_user(principal) -> bool:
    return bool(principal is not None and getattr(principal, "is_authenticated", False) and not _is_service(principal))


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
    if _is_service(principal):
        return service_allows(principal, resource, action)
    if not _is_user(principal):
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
    return as_owner and _is_user(principal) and principal_grants(principal).owner_allows(resource, action)


def can_place(principal, resource: str, action: str, *, domain, tenanted: bool = True) -> bool:
    """May the caller put a record into tenant `domain` (a create, a move to another tenant, or a
    hand-over to another owner)? By the tenant's rules, never the owner rule: the record is not the
    caller's own there yet. A null tenant of a tenanted resource only for global administrators (a
    record out of every tenant is the platform's); a resource without tenant needs a grant in `*`."""
    if _is_service(principal):
        return service_allows(principal, resource, action)
    if not _is_user(principal):
        return False
    grants = principal_grants(principal)
    if domain is None:
        return grants.is_admin if tenanted else grants.allows(resource, action, None)
    return grants.allows(resource, action, str(domain))


def can_anywhere(principal, resource: str, action: str) -> bool:
    """May the caller do `action` on `resource` somewhere (in some tenant, or on its own records)?"""
    if _is_service(principal):
        return service_allows(principal, resource, action)
    return _is_user(principal) and principal_grants(principal).allows_anywhere(resource, action)


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
    if _is_service(principal):
        return queryset if service_allows(principal, resource, action) else queryset.none()
    if not _is_user(principal):
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


# --- DRF ------------------------------------------------------------------------------------------


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
        if _is_service(principal):
            allowed = service_allows(principal, resource, action)
        else:
            allowed = _is_user(principal) and principal_grants(principal).is_admin
    else:
        allowed = can_place(principal, resource, action, domain=domain, tenanted=bool(tenant_field))
    if not allowed:
        raise exceptions.PermissionDenied("Your policies do not allow moving this record to that tenant or owner.")


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
        if _is_service(user):
            return require_service_permission(user, resource, action)
        if action == READ or _is_detail(view):
            return True
        if not tenant_field:  # a resource without tenant: writes need a grant in `*`
            return can_without_tenant(user, resource, action, as_owner=bool(owner_field))
        return can_anywhere(user, resource, action)

    def has_object_permission(self, request, view, obj):
        user = request.user
        if _is_service(user):
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
        return {owner_field: user.id} if owner_field and _is_user(user) else {}

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
        if not _is_service(request.user):
            return False
        return require_service_permission(request.user, route_resource(view), policy_action(view, request))
