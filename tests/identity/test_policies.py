"""The policy engine and the DRF permission/scope layer (merchant_platform.policy)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from merchant_platform import policy
from merchant_platform.models import PolicyDefinition
from merchant_platform.policy import cache as policy_cache
from merchant_platform.policy import grants_for, load_grants, policy_seed_role_permissions
from tests.kernel.sample.models import Widget
from tests.support.auth import make_caller, random_user_id

pytestmark = [pytest.mark.django_db(databases="__all__"), pytest.mark.usefixtures("policy_urls")]
WIDGETS = "/policy-test/widgets"
MERCHANT_A, MERCHANT_B = 7001, 7002


def widget(merchant: int, *, created_by: int | None = None, name: str = "w") -> Widget:
    return Widget.objects.create(name=name, quantity=merchant, created_by=created_by)


def ids(response) -> set[str]:
    return {row["id"] for row in response.json()["results"]}


# --- The engine -----------------------------------------------------------------------------------


def test_nothing_granted_means_nothing_allowed():
    grants = load_grants(random_user_id())
    assert not grants.is_admin
    assert not grants.allows("finance.Account", "read", None)
    assert not grants.allows_anywhere("finance.Account", "read")


def test_admin_roles_allow_everything_everywhere():
    for role in ("SUPER_ADMIN", "ADMIN"):
        caller = make_caller(roles=[role])
        grants = load_grants(caller.user_id)
        assert grants.is_admin
        assert grants.allows("anything.At", "all", "12345")


def test_a_domain_admin_has_full_access_in_its_domain_only():
    grants = load_grants(make_caller(roles=[("ADMIN", MERCHANT_A)]).user_id)
    assert grants.allows("finance.Account", "void", str(MERCHANT_A))
    assert not grants.allows("finance.Account", "read", str(MERCHANT_B))
    assert not grants.is_admin


def test_permissions_apply_only_in_joined_tenants():
    """join_domain is the tenant gate: a global permission does not open a foreign tenant."""
    grants = load_grants(make_caller(permissions=["finance.Account.read"], merchants=[MERCHANT_A]).user_id)
    assert grants.allows("finance.Account", "read", str(MERCHANT_A))
    assert not grants.allows("finance.Account", "read", str(MERCHANT_B))
    assert not grants.allows("finance.Account", "update", str(MERCHANT_A))
    assert grants.domains_allowing("finance.Account", "read") == [str(MERCHANT_A)]


def test_wildcards_and_deny():
    caller = make_caller(permissions=["finance.*.*"], merchants=[MERCHANT_A], denied=[("finance.Voucher.void", MERCHANT_A)])
    grants = load_grants(caller.user_id)
    assert grants.allows("finance.Voucher", "read", str(MERCHANT_A))
    assert not grants.allows("finance.Voucher", "void", str(MERCHANT_A))
    assert not grants.allows("commerce.Product", "read", str(MERCHANT_A))


def test_role_baselines_apply_in_the_domain_the_role_is_held():
    policy_seed_role_permissions(source="test", baseline={"CASHIER": ["test.Widget.read"], "OWNER": ["test.Widget.*"]})
    cashier = load_grants(make_caller(roles=[("CASHIER", MERCHANT_A)]).user_id)
    assert cashier.allows("test.Widget", "read", str(MERCHANT_A))
    assert not cashier.allows("test.Widget", "read", str(MERCHANT_B))
    assert not cashier.allows("test.Widget", "update", str(MERCHANT_A))
    owner = load_grants(make_caller(roles=["OWNER"]).user_id)
    assert owner.owner_allows("test.Widget", "update")
    assert not owner.owner_allows("test.Gizmo", "read")


def test_seeding_is_idempotent_and_prunes_what_the_service_no_longer_lists():
    first = policy_seed_role_permissions(source="seedtest", baseline={"EMPLOYEE": ["seed.A.read", "seed.A.update"]})
    again = policy_seed_role_permissions(source="seedtest", baseline={"EMPLOYEE": ["seed.A.read", "seed.A.update"]})
    changed = policy_seed_role_permissions(source="seedtest", baseline={"EMPLOYEE": ["seed.A.read"]})
    assert (first, again, changed) == ({"created": 2, "removed": 0}, {"created": 0, "removed": 0}, {"created": 0, "removed": 1})
    rows = PolicyDefinition.objects.filter(source="seedtest").values_list("subject_id", "resource", "action")
    assert list(rows) == [("EMPLOYEE", "seed.A", "read")]


def test_unknown_roles_are_refused():
    with pytest.raises(ValueError, match="unknown role"):
        policy.policy_grant_role(user_id=random_user_id(), role="ROOT")


def test_cached_grants_follow_changes():
    user_id = random_user_id()
    assert not grants_for(user_id).allows_anywhere("test.Widget", "read")
    policy.policy_grant_permission(user_id=user_id, resource="test.Widget", action="read")
    assert grants_for(user_id).allows("test.Widget", "read", None)
    row = PolicyDefinition.objects.get(subject_id=str(user_id))
    policy.policy_revoke(policy_id=row.pk)
    assert not grants_for(user_id).allows("test.Widget", "read", None)


def test_role_baseline_changes_reach_cached_users():
    user_id = make_caller(roles=["EMPLOYEE"]).user_id
    assert not grants_for(user_id).allows("bump.Thing", "read", None)
    policy_seed_role_permissions(source="bumptest", baseline={"EMPLOYEE": ["bump.Thing.read"]})
    assert grants_for(user_id).allows("bump.Thing", "read", None)


def test_decisions_come_from_postgresql_when_redis_is_down():
    caller = make_caller(permissions=["test.Widget.read"])
    dead_redis = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:9/0"}}
    with override_settings(CACHES=dead_redis):
        assert grants_for(caller.user_id).allows("test.Widget", "read", None)
        policy.policy_grant_permission(user_id=caller.user_id, resource="test.Widget", action="update")
        assert grants_for(caller.user_id).allows("test.Widget", "update", None)
    policy_cache._cache_state["down_until"] = 0.0


# --- Through HTTP ---------------------------------------------------------------------------------


def test_a_list_shows_only_the_callers_tenants(client):
    mine, theirs = widget(MERCHANT_A), widget(MERCHANT_B)
    caller = make_caller(roles=[("EMPLOYEE", MERCHANT_A)], permissions=[("test.Widget.read", MERCHANT_A)])
    response = caller.client().get(WIDGETS)
    assert response.status_code == 200
    assert ids(response) == {str(mine.pk)}
    assert str(theirs.pk) not in ids(response)


def test_no_policy_is_an_empty_list_not_an_error():
    widget(MERCHANT_A)
    response = make_caller().client().get(WIDGETS)
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_another_tenants_record_is_404_not_403():
    theirs = widget(MERCHANT_B)
    client = make_caller(permissions=["test.Widget.*"], merchants=[MERCHANT_A]).client()
    for method in ("get", "patch", "delete"):
        response = getattr(client, method)(f"{WIDGETS}/{theirs.pk}", format="json")
        assert response.status_code == 404, method
        assert response.json()["code"] == "NOT_FOUND"
    assert client.post(f"{WIDGETS}/{theirs.pk}/archive").status_code == 404


def test_visible_but_not_permitted_is_403():
    mine = widget(MERCHANT_A)
    client = make_caller(permissions=[("test.Widget.read", MERCHANT_A)], merchants=[MERCHANT_A]).client()
    assert client.get(f"{WIDGETS}/{mine.pk}").status_code == 200
    response = client.patch(f"{WIDGETS}/{mine.pk}", {"name": "renamed"}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "FORBIDDEN"
    assert client.post(f"{WIDGETS}/{mine.pk}/archive").status_code == 403


def test_custom_actions_are_permissions_of_their_own():
    mine = widget(MERCHANT_A)
    client = make_caller(
        permissions=[("test.Widget.read", MERCHANT_A), ("test.Widget.archive", MERCHANT_A)], merchants=[MERCHANT_A]
    ).client()
    assert client.post(f"{WIDGETS}/{mine.pk}/archive").json() == {"archived": str(mine.pk)}


def test_create_checks_the_new_records_tenant_and_records_the_owner():
    caller = make_caller(permissions=[("test.Widget.create", MERCHANT_A), ("test.Widget.read", MERCHANT_A)], merchants=[MERCHANT_A])
    client = caller.client()
    created = client.post(WIDGETS, {"name": "new", "quantity": MERCHANT_A}, format="json")
    assert created.status_code == 201
    assert created.json()["created_by"] == caller.user_id
    assert client.post(WIDGETS, {"name": "elsewhere", "quantity": MERCHANT_B}, format="json").status_code == 403
    assert make_caller().client().post(WIDGETS, {"name": "x", "quantity": MERCHANT_A}, format="json").status_code == 403


def test_owner_reaches_its_own_records_in_the_tenants_it_belongs_to():
    policy_seed_role_permissions(source="test", baseline={"CASHIER": ["test.Widget.read"], "OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=[("OWNER", MERCHANT_A)], merchants=[MERCHANT_B])
    own, foreign = widget(MERCHANT_B, created_by=caller.user_id), widget(MERCHANT_B, created_by=random_user_id())
    client = caller.client()
    assert ids(client.get(WIDGETS)) == {str(own.pk)}
    assert client.patch(f"{WIDGETS}/{own.pk}", {"name": "mine"}, format="json").status_code == 200
    assert client.get(f"{WIDGETS}/{foreign.pk}").status_code == 404


def test_admin_sees_every_tenant():
    rows = {str(widget(MERCHANT_A).pk), str(widget(MERCHANT_B).pk)}
    response = make_caller(roles=["ADMIN"]).client().get(WIDGETS, {"pageSize": 200})
    assert rows <= ids(response)


def test_a_service_caller_has_full_access(service_client):
    row = widget(MERCHANT_B)
    assert service_client.get(f"{WIDGETS}/{row.pk}").status_code == 200


def test_resources_without_tenant_need_a_global_permission():
    row = widget(MERCHANT_A)
    assert (
        make_caller(permissions=[("test.Gadget.read", MERCHANT_A)], merchants=[MERCHANT_A])
        .client()
        .get(f"/policy-test/gadgets/{row.pk}")
        .status_code
        == 404
    )
    assert make_caller(permissions=["test.Gadget.read"]).client().get(f"/policy-test/gadgets/{row.pk}").status_code == 200


def test_owner_grants_reach_only_its_own_records_without_tenant():
    """OWNER held everywhere (`*`) is still a role over the records one owns: its permissions are no
    global permission on resources without tenant."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Gadget.read"]})
    caller = make_caller(roles=["OWNER"])
    grants = load_grants(caller.user_id)
    assert not grants.allows("test.Gadget", "read", None)
    assert grants.owner_allows("test.Gadget", "read")
    own, foreign = widget(MERCHANT_A, created_by=caller.user_id), widget(MERCHANT_A, created_by=random_user_id())
    client = caller.client()
    assert client.get(f"/policy-test/gadgets/{own.pk}").status_code == 200
    assert client.get(f"/policy-test/gadgets/{foreign.pk}").status_code == 404
    assert ids(client.get("/policy-test/gadgets", {"pageSize": 200})) == {str(own.pk)}


def test_a_grant_takes_effect_on_the_next_request():
    mine = widget(MERCHANT_A)
    caller = make_caller(merchants=[MERCHANT_A])
    client = caller.client()
    assert client.get(f"{WIDGETS}/{mine.pk}").status_code == 404
    policy.policy_grant_permission(user_id=caller.user_id, resource="test.Widget", action="read", domain=MERCHANT_A)
    assert client.get(f"{WIDGETS}/{mine.pk}").status_code == 200
    policy.policy_revoke_user(user_id=caller.user_id, kind=PolicyDefinition.Kind.JOIN_DOMAIN)
    assert client.get(f"{WIDGETS}/{mine.pk}").status_code == 404
