"""Authorization hardening (issue 22): the rules every service inherits from the kernel's policy
layer, checked through the policy test views (tests.identity.urls: `Widget.quantity` stands in for
the tenant, `created_by` is the owner)."""

from __future__ import annotations

import pytest

from merchant_platform.authorization import load_grants, policy_seed_role_permissions
from tests.kernel.sample.models import Widget
from tests.support.auth import make_caller, random_user_id

pytestmark = pytest.mark.django_db(databases="__all__")
WIDGETS = "/policy-test/widgets"
MERCHANT_A, MERCHANT_B = 7101, 7102


@pytest.fixture(autouse=True)
def policy_urls(settings):
    settings.ROOT_URLCONF = "tests.identity.urls"


def widget(merchant: int | None, *, created_by: int | None = None, name: str = "w") -> Widget:
    return Widget.objects.create(name=name, quantity=merchant, created_by=created_by)


def ids(response) -> set[str]:
    return {row["id"] for row in response.json()["results"]}


# --- 3. The owner rule ----------------------------------------------------------------------------


def test_owner_reaches_own_records_only_in_tenants_it_belongs_to():
    """OWNER held in merchant A no longer reaches its records in merchant B unless it belongs to B."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=[("OWNER", MERCHANT_A)])
    elsewhere = widget(MERCHANT_B, created_by=caller.user_id)
    client = caller.client()
    assert client.get(f"{WIDGETS}/{elsewhere.pk}").status_code == 404
    assert str(elsewhere.pk) not in ids(client.get(WIDGETS, {"pageSize": 200}))
    assert client.patch(f"{WIDGETS}/{elsewhere.pk}", {"name": "x"}, format="json").status_code == 404


def test_a_deny_in_the_records_tenant_wins_over_the_owner_rule():
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=["OWNER"], merchants=[MERCHANT_B], denied=[("test.Widget.update", MERCHANT_B)])
    own = widget(MERCHANT_B, created_by=caller.user_id)
    client = caller.client()
    assert client.get(f"{WIDGETS}/{own.pk}").status_code == 200
    assert client.patch(f"{WIDGETS}/{own.pk}", {"name": "x"}, format="json").status_code == 403


def test_owner_still_reaches_own_records_in_its_tenants_and_without_tenant():
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=[("OWNER", MERCHANT_A)], merchants=[MERCHANT_B])
    own_b, foreign_b = widget(MERCHANT_B, created_by=caller.user_id), widget(MERCHANT_B, created_by=random_user_id())
    client = caller.client()
    assert client.get(f"{WIDGETS}/{own_b.pk}").status_code == 200
    assert client.get(f"{WIDGETS}/{foreign_b.pk}").status_code == 404
    assert ids(client.get(WIDGETS, {"pageSize": 200})) >= {str(own_b.pk)}


# --- 2. Resources without tenant ------------------------------------------------------------------


def test_writes_without_tenant_need_a_grant_everywhere():
    """A merchant's ADMIN or OWNER holds nothing in `*`: no write to a resource or record without tenant."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Gadget.*"]})
    merchant_admin = load_grants(make_caller(roles=[("ADMIN", MERCHANT_A)]).user_id)
    assert not merchant_admin.allows("test.Gadget", "create", None)
    merchant_owner = load_grants(make_caller(roles=[("OWNER", MERCHANT_A)]).user_id)
    assert merchant_owner.owner_allows("test.Gadget", "read")
    assert not merchant_owner.owner_allows("test.Gadget", "update")
    assert load_grants(make_caller(roles=["OWNER"]).user_id).owner_allows("test.Gadget", "update")
