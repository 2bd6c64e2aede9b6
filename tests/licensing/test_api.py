"""Licensing over HTTP: routes, authentication, the policy layer, problem documents."""

from __future__ import annotations

import pytest

from apps.licensing import services
from apps.licensing.models import Activation, License, LicenseEvent

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/licensing"
MERCHANT = 31337


@pytest.fixture
def admin(make_caller, seeded):
    return make_caller(roles=["ADMIN"]).client()


@pytest.fixture
def merchant_license(make_license):
    return make_license(merchant_id=MERCHANT, limit=2)


def test_every_route_requires_authentication(client, merchant_license):
    for method, path in [
        ("get", f"{BASE}/licenses"),
        ("get", f"{BASE}/licenses/{merchant_license.id}"),
        ("post", f"{BASE}/licenses/{merchant_license.id}/actions/validate"),
        ("post", f"{BASE}/licenses/actions/validate-key"),
        ("get", f"{BASE}/activations"),
        ("get", f"{BASE}/policies"),
    ]:
        response = getattr(client, method)(path)
        assert response.status_code == 401, path
        assert response["Content-Type"] == "application/problem+json"


def test_admin_creates_and_drives_a_license(admin):
    response = admin.post(f"{BASE}/licenses", {"ownerId": "900", "merchantId": str(MERCHANT), "name": "Till"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "INACTIVE" and body["ownerId"] == "900" and body["merchantId"] == str(MERCHANT)
    assert body["activationConfig"] == {"limit": 1} and body["policy"] == "FREE_TRIAL"
    assert body["expiresAt"] and body["lastValidatedAt"] is None and body["key"]
    license_id = body["id"]
    assert admin.post(f"{BASE}/licenses/{license_id}/actions/activate").json()["status"] == "ACTIVATED"
    conflict = admin.post(f"{BASE}/licenses/{license_id}/actions/reinstate")
    assert conflict.status_code == 409
    assert conflict["Content-Type"] == "application/problem+json"
    assert conflict.json()["code"] == "LICENSE_INVALID_TRANSITION"
    # RFC 9457's integer status stays; the license's status travels as licenseStatus.
    assert conflict.json()["status"] == 409
    assert conflict.json()["licenseStatus"] == "ACTIVATED" and conflict.json()["action"] == "reinstate"
    assert admin.post(f"{BASE}/licenses/{license_id}/actions/suspend").json()["status"] == "SUSPENDED"
    assert admin.post(f"{BASE}/licenses/{license_id}/actions/reinstate").json()["status"] == "ACTIVATED"
    renewed = admin.post(f"{BASE}/licenses/{license_id}/actions/renew", {"expiresAt": "2999-01-01T00:00:00Z"}, format="json")
    assert renewed.json()["expiresAt"].startswith("2999-01-01")
    assert admin.post(f"{BASE}/licenses/{license_id}/actions/revoke").json()["status"] == "REVOKED"
    revoked = admin.post(f"{BASE}/licenses/{license_id}/actions/activate")
    assert (revoked.status_code, revoked.json()["code"]) == (409, "LICENSE_REVOKED")
    types = list(LicenseEvent.objects.filter(license_id=int(license_id)).values_list("type", "actor"))
    assert [t for t, _ in types] == ["created", "activated", "suspended", "reinstated", "renewed", "revoked"]
    assert all(actor.startswith("user:") for _, actor in types)


def test_bad_input_names_the_field(admin, merchant_license):
    response = admin.post(f"{BASE}/licenses/{merchant_license.id}/actions/validate", {}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"
    assert response.json()["errors"][0]["field"] == "fingerprint"
    response = admin.post(f"{BASE}/licenses", {"ownerId": "1", "activationConfig": {"limit": -1}}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "activationConfig.limit"
    past = admin.post(f"{BASE}/licenses/{merchant_license.id}/actions/renew", {"expiresAt": "2000-01-01T00:00:00Z"}, format="json")
    assert past.status_code == 400
    assert admin.get(f"{BASE}/licenses/not-a-number").status_code == 404


def test_patch_is_plain_crud(admin, merchant_license):
    events = LicenseEvent.objects.filter(license=merchant_license).count()
    url = f"{BASE}/licenses/{merchant_license.id}"
    status_change = admin.patch(url, {"name": "Renamed", "status": "REVOKED"}, format="json")
    assert status_change.status_code == 400 and [error["field"] for error in status_change.json()["errors"]] == ["status"]
    response = admin.patch(url, {"name": "Renamed", "activationConfig": {"limit": 5}}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["activationConfig"], body["status"]) == ("Renamed", {"limit": 5}, "ACTIVATED")
    assert LicenseEvent.objects.filter(license=merchant_license).count() == events
    assert admin.put(f"{BASE}/licenses/{merchant_license.id}", {}, format="json").status_code == 405


def test_validate_over_http(admin, merchant_license):
    url = f"{BASE}/licenses/{merchant_license.id}/actions/validate"
    first = admin.post(url, {"fingerprint": "till-1"}, format="json").json()
    assert first["valid"] is True and first["code"] == "VALID"
    assert first["activation"]["fingerprint"] == "till-1" and first["license"]["id"] == str(merchant_license.id)
    admin.post(url, {"fingerprint": "till-2"}, format="json")
    full = admin.post(url, {"fingerprint": "till-3"}, format="json").json()
    assert (full["valid"], full["code"], full["activation"]) == (False, "TOO_MANY_ACTIVATIONS", None)
    unknown = admin.post(url, {"fingerprint": "till-9", "activate": False}, format="json").json()
    assert unknown["code"] == "UNKNOWN_FINGERPRINT"
    by_key = admin.post(f"{BASE}/licenses/actions/validate-key", {"key": merchant_license.key, "fingerprint": "till-1"}, format="json")
    assert by_key.json()["code"] == "VALID"
    missing = admin.post(f"{BASE}/licenses/actions/validate-key", {"key": "NO-SUCH-KEY", "fingerprint": "till-1"}, format="json")
    assert (missing.status_code, missing.json()["code"], missing.json()["license"]) == (200, "NOT_FOUND", None)


def test_owner_sees_only_its_licenses(make_caller, make_license):
    owner = make_caller(roles=["OWNER"])
    mine = make_license(owner_id=owner.user_id)
    theirs = make_license(owner_id=owner.user_id + 1)
    client = owner.client()
    listed = client.get(f"{BASE}/licenses").json()
    assert [item["id"] for item in listed["results"]] == [str(mine.id)]
    assert client.get(f"{BASE}/licenses/{theirs.id}").status_code == 404
    assert client.post(f"{BASE}/licenses/{theirs.id}/actions/validate", {"fingerprint": "x"}, format="json").status_code == 404
    assert client.post(f"{BASE}/licenses/{mine.id}/actions/validate", {"fingerprint": "x"}, format="json").json()["valid"]
    # OWNER's baseline: validate and deactivate its own license, not suspend it.
    assert client.post(f"{BASE}/licenses/{mine.id}/actions/suspend").status_code == 403
    assert client.post(f"{BASE}/licenses/{mine.id}/actions/deactivate").json()["status"] == "INACTIVE"
    assert client.post(f"{BASE}/licenses", {"ownerId": str(owner.user_id)}, format="json").status_code == 403
    # A key the caller may not use answers like an unknown one.
    foreign = client.post(f"{BASE}/licenses/actions/validate-key", {"key": theirs.key, "fingerprint": "x"}, format="json")
    assert foreign.json()["code"] == "NOT_FOUND"
    assert not Activation.objects.filter(license=theirs).exists()


def test_merchant_staff_reach_their_merchants_licenses(make_caller, merchant_license, make_license):
    other_merchant = make_license(merchant_id=MERCHANT + 1)
    cashier = make_caller(roles=[("CASHIER", MERCHANT)]).client()
    listed = cashier.get(f"{BASE}/licenses").json()["results"]
    assert [item["id"] for item in listed] == [str(merchant_license.id)]
    assert cashier.post(f"{BASE}/licenses/{merchant_license.id}/actions/validate", {"fingerprint": "till"}, format="json").json()["valid"]
    assert cashier.get(f"{BASE}/licenses/{other_merchant.id}").status_code == 404
    assert cashier.post(f"{BASE}/licenses/{merchant_license.id}/actions/revoke").status_code == 403
    assert cashier.get(f"{BASE}/activations").json()["results"] == []  # CASHIER's baseline does not read seats
    employee = make_caller(roles=[("EMPLOYEE", MERCHANT)]).client()
    seats = employee.get(f"{BASE}/activations", {"licenseId": str(merchant_license.id)}).json()["results"]
    assert [seat["fingerprint"] for seat in seats] == ["till"]


def test_nobody_without_grants_sees_anything(make_caller, merchant_license):
    stranger = make_caller().client()
    assert stranger.get(f"{BASE}/licenses").json()["results"] == []
    assert stranger.get(f"{BASE}/licenses/{merchant_license.id}").status_code == 404


def test_activation_routes(admin, make_caller, make_license):
    owner = make_caller(roles=["OWNER"])
    license = make_license(owner_id=owner.user_id, limit=1)
    # POST /activations is an operator tool: it bypasses the seat limit, and owners may not use it.
    for fingerprint in ("a", "b"):
        created = admin.post(f"{BASE}/activations", {"licenseId": str(license.id), "fingerprint": fingerprint}, format="json")
        assert created.status_code == 201
    assert Activation.objects.filter(license=license).count() == 2
    duplicate = admin.post(f"{BASE}/activations", {"licenseId": str(license.id), "fingerprint": "a"}, format="json")
    assert (duplicate.status_code, duplicate.json()["code"]) == (409, "ACTIVATION_EXISTS")
    missing = admin.post(f"{BASE}/activations", {"licenseId": "12345", "fingerprint": "a"}, format="json")
    assert (missing.status_code, missing.json()["code"]) == (400, "LICENSE_NOT_FOUND")
    client = owner.client()
    assert client.post(f"{BASE}/activations", {"licenseId": str(license.id), "fingerprint": "c"}, format="json").status_code == 403
    seats = client.get(f"{BASE}/activations").json()["results"]
    assert sorted(seat["fingerprint"] for seat in seats) == ["a", "b"]
    events = LicenseEvent.objects.filter(license=license).count()
    assert client.delete(f"{BASE}/activations/{seats[0]['id']}").status_code == 204
    assert LicenseEvent.objects.filter(license=license).count() == events  # no audit event
    assert client.get(f"{BASE}/activations/{seats[0]['id']}").status_code == 404


def test_policies(admin, make_caller):
    created = admin.post(
        f"{BASE}/policies",
        {"code": "PRO", "name": "Pro", "durationSeconds": 86400, "activationLimit": 5, "entitlements": ["x"]},
        format="json",
    )
    assert created.status_code == 201
    assert admin.post(f"{BASE}/policies", {"code": "PRO", "name": "Again"}, format="json").json()["code"] == "POLICY_CODE_TAKEN"
    recode = admin.patch(f"{BASE}/policies/{created.json()['id']}", {"activationLimit": 9, "code": "NEW"}, format="json")
    assert recode.status_code == 400 and [error["field"] for error in recode.json()["errors"]] == ["code"]
    patched = admin.patch(f"{BASE}/policies/{created.json()['id']}", {"activationLimit": 9}, format="json").json()
    assert (patched["activationLimit"], patched["code"]) == (9, "PRO")
    license = admin.post(f"{BASE}/licenses", {"ownerId": "1", "policyId": created.json()["id"]}, format="json").json()
    assert license["activationConfig"] == {"limit": 9} and license["policy"] == "PRO"
    assert make_caller(roles=["OWNER"]).client().post(f"{BASE}/policies", {"code": "X", "name": "X"}, format="json").status_code == 403


def test_service_callers_have_full_access(service_client, merchant_license):
    response = service_client.post(f"{BASE}/licenses/{merchant_license.id}/actions/validate", {"fingerprint": "svc"}, format="json")
    assert response.json()["valid"]
    suspended = service_client.post(f"{BASE}/licenses/{merchant_license.id}/actions/suspend")
    assert suspended.json()["status"] == "SUSPENDED"
    actor = LicenseEvent.objects.get(license=merchant_license, type="suspended").actor
    assert actor.startswith("service:")


def test_no_route_for_events_or_heartbeat(admin, merchant_license):
    assert admin.get(f"{BASE}/license-events").status_code == 404
    assert admin.get(f"{BASE}/licenses/{merchant_license.id}/events").status_code == 404
    assert admin.post(f"{BASE}/licenses/{merchant_license.id}/actions/heartbeat").status_code == 404


def test_delete_is_soft(admin, merchant_license):
    assert admin.delete(f"{BASE}/licenses/{merchant_license.id}").status_code == 204
    assert admin.get(f"{BASE}/licenses/{merchant_license.id}").status_code == 404
    assert License.all_objects.get(pk=merchant_license.id).deleted_at is not None


def test_openapi_document(client):
    response = client.get(f"{BASE}/doc/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert f"{BASE}/licenses/{{id}}/actions/validate" in paths
    assert f"{BASE}/activations/{{id}}" in paths


def test_services_are_reachable_in_process(merchant_license):
    assert services.license_validate(license_id=merchant_license.id, fingerprint="direct").valid


def test_lists_filter_and_order_by_their_camelcase_names(admin, make_license):
    first = make_license(merchant_id=MERCHANT, expires_at="2990-01-01T00:00:00Z")
    second = make_license(merchant_id=MERCHANT, expires_at="2980-01-01T00:00:00Z")
    make_license(merchant_id=MERCHANT + 1)

    ids = [row["id"] for row in admin.get(f"{BASE}/licenses", {"merchantId": MERCHANT, "ordering": "expiresAt"}).json()["results"]]
    assert ids == [str(second.id), str(first.id)]
    ids = [row["id"] for row in admin.get(f"{BASE}/licenses", {"merchantId": MERCHANT, "ordering": "-expiresAt"}).json()["results"]]
    assert ids == [str(first.id), str(second.id)]
    assert admin.get(f"{BASE}/licenses", {"ordering": "key"}).status_code == 400
    codes = [row["code"] for row in admin.get(f"{BASE}/policies", {"ordering": "-code"}).json()["results"]]
    assert codes == sorted(codes, reverse=True)


@pytest.mark.parametrize(("field", "value"), [("durationSeconds", 2**31), ("activationLimit", 2**31), ("durationSeconds", 0)])
def test_policy_numbers_past_their_columns_are_a_400(admin, field, value):
    response = admin.post(f"{BASE}/policies", {"code": "BIG", "name": "Big", field: value}, format="json")
    assert response.status_code == 400 and [error["field"] for error in response.json()["errors"]] == [field]


def test_the_schema_declares_the_numeric_bounds(client):
    schema = client.get(f"{BASE}/doc/openapi.json").json()["components"]["schemas"]["PolicyRequest"]["properties"]
    assert schema["durationSeconds"]["maximum"] == 2**31 - 1
    assert schema["activationLimit"]["maximum"] == 100_000
