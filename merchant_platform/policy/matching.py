"""Matching: a user's grants (`Grants`, its `Rule`s) and the decisions they give, without I/O.

The rules they implement are in the package's docstring (merchant_platform.policy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from merchant_platform.models import PolicyDefinition

SUPER_ADMIN, ADMIN, OWNER, EMPLOYEE, CASHIER = "SUPER_ADMIN", "ADMIN", "OWNER", "EMPLOYEE", "CASHIER"
ROLES = (SUPER_ADMIN, ADMIN, OWNER, EMPLOYEE, CASHIER)
FULL_ACCESS_ROLES = frozenset({SUPER_ADMIN, ADMIN})
ANY = "*"
READ, CREATE, UPDATE, DELETE = "read", "create", "update", "delete"


def validate_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")


def parse_permission(permission: str) -> tuple[str, str]:
    """ "finance.Account.read" -> ("finance.Account", "read"); "*" -> ("*", "*")."""
    if permission == ANY:
        return ANY, ANY
    resource, dot, action = permission.rpartition(".")
    if not dot or not resource or not action:
        raise ValueError(f"a permission is `<resource>.<action>`, got {permission!r}")
    return resource, action


def matches(pattern: str, value: str) -> bool:
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
        return in_domain and matches(self.resource, resource) and matches(self.action, action)


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
        matching = [r for r in self.rules if r.via in (OWNER, "user") and matches(r.resource, resource) and matches(r.action, action)]
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
