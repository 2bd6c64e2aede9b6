"""Licensing's side of the authorization rules of issue 22 (the kernel's are in
tests/kernel/test_authorization.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.licensing.models import Policy

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/licensing"
MERCHANT = 31337


def test_a_merchants_admin_cannot_write_the_platform_wide_policy_catalogue(make_caller, seeded):
    """Policies have no tenant: creating one needs a grant in `*`, not an ADMIN role in one merchant."""
    merchant_admin = make_caller(roles=[("ADMIN", MERCHANT)]).client()
    response = merchant_admin.post(f"{BASE}/policies", {"code": "HIJACK", "name": "Hijack"}, format="json")
    assert response.status_code == 403
    assert not Policy.objects.filter(code="HIJACK").exists()
    granted = make_caller(permissions=["licensing.Policy.create"]).client()
    assert granted.post(f"{BASE}/policies", {"code": "GRANTED", "name": "Granted"}, format="json").status_code == 201


def _patch(client, license, body):
    return client.patch(f"{BASE}/licenses/{license.id}", body, format="json")


def test_a_license_leaves_every_tenant_only_by_a_global_administrator(make_caller, make_license):
    license = make_license(merchant_id=MERCHANT)
    merchant_admin = make_caller(roles=[("ADMIN", MERCHANT)]).client()
    assert _patch(merchant_admin, license, {"merchantId": None}).status_code == 403
    assert _patch(merchant_admin, license, {"merchantId": str(MERCHANT + 1)}).status_code == 403
    assert merchant_admin.post(f"{BASE}/licenses", {"ownerId": "1"}, format="json").status_code == 403  # created out of every tenant
    license.refresh_from_db()
    assert license.merchant_id == MERCHANT
    global_admin = make_caller(roles=["ADMIN"]).client()
    assert _patch(global_admin, license, {"merchantId": None}).json()["merchantId"] is None


def test_handing_a_license_to_another_owner_needs_update_by_the_tenants_rules(make_caller, make_license):
    """The owner rule reaches the record where it is; it does not let an owner give it away."""
    from merchant_platform.policy import policy_seed_role_permissions

    policy_seed_role_permissions(source="test-licensing", baseline={"OWNER": ["licensing.License.update"]})
    owner = make_caller(roles=["OWNER"])
    license = make_license(owner_id=owner.user_id)  # no merchant
    client = owner.client()
    assert _patch(client, license, {"name": "mine"}).status_code == 200
    assert _patch(client, license, {"ownerId": str(owner.user_id + 1)}).status_code == 403
    license.refresh_from_db()
    assert license.owner_id == owner.user_id


def test_patch_cannot_widen_a_license_beyond_the_callers_permissions(make_caller, make_license):
    """`update` narrows; a later or no expiry needs `renew`, more seats need `create`."""
    license = make_license(merchant_id=MERCHANT, limit=2)
    editor = make_caller(roles=[("EMPLOYEE", MERCHANT)], permissions=[("licensing.License.update", MERCHANT)]).client()
    later = (license.expires_at + timedelta(days=365)).isoformat()
    earlier = (license.expires_at - timedelta(days=1)).isoformat()
    assert _patch(editor, license, {"expiresAt": later}).status_code == 403
    assert _patch(editor, license, {"expiresAt": None}).status_code == 403
    assert _patch(editor, license, {"activationConfig": {"limit": 50}}).status_code == 403
    license.refresh_from_db()
    assert license.activation_limit == 2
    assert _patch(editor, license, {"expiresAt": earlier, "activationConfig": {"limit": 1}}).status_code == 200
    renewer = make_caller(
        roles=[("EMPLOYEE", MERCHANT)],
        permissions=[("licensing.License.update", MERCHANT), ("licensing.License.renew", MERCHANT), ("licensing.License.create", MERCHANT)],
    ).client()
    widened = _patch(renewer, license, {"expiresAt": later, "activationConfig": {"limit": 50}})
    assert widened.status_code == 200
    assert widened.json()["activationConfig"] == {"limit": 50}


def test_post_activations_answers_404_alike_for_another_tenants_license_and_a_missing_one(make_caller, make_license):
    foreign = make_license(merchant_id=MERCHANT + 1)
    merchant_admin = make_caller(roles=[("ADMIN", MERCHANT)]).client()
    answers = [
        merchant_admin.post(f"{BASE}/activations", {"licenseId": str(license_id), "fingerprint": "till"}, format="json")
        for license_id in (foreign.id, 4_000_000_000_000)
    ]
    assert [response.status_code for response in answers] == [404, 404]
    bodies = [{key: value for key, value in response.json().items() if key != "requestId"} for response in answers]
    assert bodies[0] == bodies[1]
