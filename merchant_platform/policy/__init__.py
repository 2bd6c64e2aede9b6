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

A user's grants are cached in Redis (merchant_platform.policy.cache). One module per concern:
`matching` (grants and the decisions they give), `loading` (grants from PostgreSQL), `cache`,
`writes`, `seeding`, `decisions` (per principal, service accounts included), `scoping` (querysets),
`write_guard` (moves between tenants and owners) and `permissions` (the DRF classes). Services
import what they use from this package; how a view declares its resource, tenant and owner fields:
docs/authentication.md.
"""

from merchant_platform.policy.cache import grants_for, invalidate_roles, invalidate_user
from merchant_platform.policy.decisions import (
    ServiceAccountForbidden,
    can,
    can_anywhere,
    can_place,
    can_without_tenant,
    principal_grants,
    require_service_permission,
    service_allows,
)
from merchant_platform.policy.loading import MERCHANT_CREATE_SOURCE, load_grants
from merchant_platform.policy.matching import (
    ADMIN,
    ANY,
    CASHIER,
    CREATE,
    DELETE,
    EMPLOYEE,
    OWNER,
    READ,
    ROLES,
    SUPER_ADMIN,
    UPDATE,
    Grants,
    Rule,
    parse_permission,
)
from merchant_platform.policy.permissions import IsServicePrincipal, PolicyPermission, PolicyScopedMixin, policy_action, route_resource
from merchant_platform.policy.scoping import scope_queryset
from merchant_platform.policy.seeding import policy_seed_role_permissions
from merchant_platform.policy.write_guard import check_changes, record_tenant
from merchant_platform.policy.writes import (
    policy_grant_permission,
    policy_grant_role,
    policy_join_domain,
    policy_revoke,
    policy_revoke_user,
)

__all__ = [
    "ADMIN",
    "ANY",
    "CASHIER",
    "CREATE",
    "DELETE",
    "EMPLOYEE",
    "MERCHANT_CREATE_SOURCE",
    "OWNER",
    "READ",
    "ROLES",
    "SUPER_ADMIN",
    "UPDATE",
    "Grants",
    "IsServicePrincipal",
    "PolicyPermission",
    "PolicyScopedMixin",
    "Rule",
    "ServiceAccountForbidden",
    "can",
    "can_anywhere",
    "can_place",
    "can_without_tenant",
    "check_changes",
    "grants_for",
    "invalidate_roles",
    "invalidate_user",
    "load_grants",
    "parse_permission",
    "policy_action",
    "policy_grant_permission",
    "policy_grant_role",
    "policy_join_domain",
    "policy_revoke",
    "policy_revoke_user",
    "policy_seed_role_permissions",
    "principal_grants",
    "record_tenant",
    "require_service_permission",
    "route_resource",
    "scope_queryset",
    "service_allows",
]
