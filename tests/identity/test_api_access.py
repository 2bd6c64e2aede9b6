"""Who reaches what in identity's API: internal endpoints, administration of users and policies,
the OpenAPI document and the seeds."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from apps.identity import seeds
from apps.identity.models import User
from merchant_platform.models import PolicyDefinition
from tests.identity.conftest import API, sign_up
from tests.support.auth import bearer, make_caller, service_headers

pytestmark = pytest.mark.django_db(databases="__all__")


def test_internal_lookup_needs_service_credentials(client):
    body = sign_up(client, email="lookup@example.com")
    user_id = body["user"]["id"]
    by_id = client.get(f"{API}/internal/users/{user_id}", **service_headers())
    assert by_id.status_code == 200 and by_id.json()["email"] == "lookup@example.com"
    by_email = client.get(f"{API}/internal/users", {"email": "LOOKUP@example.com"}, **service_headers())
    assert [row["id"] for row in by_email.json()["results"]] == [user_id]
    # A user token, even an administrator's, is not a service credential.
    admin = make_caller(roles=["SUPER_ADMIN"])
    for headers in ({"HTTP_AUTHORIZATION": f"Bearer {body['accessToken']}"}, admin.headers, {}):
        response = client.get(f"{API}/internal/users/{user_id}", **headers)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Basic")
    wrong = client.get(f"{API}/internal/users/{user_id}", HTTP_AUTHORIZATION="Basic cGxhdGZvcm06d3Jvbmc=")
    assert wrong.status_code == 401


def test_only_holders_of_identity_user_read_list_accounts(client):
    sign_up(client, email="listed@example.com")
    admin = make_caller(roles=["ADMIN"]).client()
    assert "listed@example.com" in {row["email"] for row in admin.get(f"{API}/users", {"email": "listed@example.com"}).json()["results"]}
    nobody = make_caller().client()
    assert nobody.get(f"{API}/users").json()["results"] == []


def test_operator_lists_filter_and_order_by_their_camelcase_names(client):
    first = sign_up(client, email="first@example.com")["user"]["id"]
    second = sign_up(client, email="second@example.com")["user"]["id"]
    admin = make_caller(roles=["SUPER_ADMIN"]).client()

    users = admin.get(f"{API}/users", {"isActive": "true", "ordering": "-createdAt"}).json()["results"]
    ids = [row["id"] for row in users]
    assert ids.index(second) < ids.index(first)
    assert admin.get(f"{API}/users", {"ordering": "password"}).status_code == 400
    member = make_caller()
    admin.post(f"{API}/policies", {"kind": "ROLE", "subjectId": str(member.user_id), "role": "ADMIN"}, format="json")
    policies = admin.get(f"{API}/policies", {"subjectId": str(member.user_id), "kind": "ROLE"}).json()["results"]
    assert [(row["subjectId"], row["role"]) for row in policies] == [(str(member.user_id), "ADMIN")]


def test_an_admin_grants_a_role_and_the_next_request_sees_it(client):
    member = make_caller()
    admin = make_caller(roles=["SUPER_ADMIN"]).client()
    assert member.client().get(f"{API}/users").json()["results"] == []
    created = admin.post(f"{API}/policies", {"kind": "ROLE", "subjectId": str(member.user_id), "role": "ADMIN"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["subjectType"] == "User" and created.json()["domain"] == "*"
    sign_up(client, email="visible@example.com")
    assert member.client().get(f"{API}/users").json()["count"] >= 1
    assert admin.delete(f"{API}/policies/{created.json()['id']}").status_code == 204
    assert member.client().get(f"{API}/users").json()["results"] == []


def test_a_merchant_admin_manages_policies_of_its_merchant_only():
    merchant_admin = make_caller(roles=[("ADMIN", 501)]).client()
    employee = make_caller(merchants=[501])
    inside = merchant_admin.post(
        f"{API}/policies", {"kind": "ROLE", "subjectId": str(employee.user_id), "role": "EMPLOYEE", "domain": "501"}, format="json"
    )
    assert inside.status_code == 201
    outside = merchant_admin.post(
        f"{API}/policies", {"kind": "ROLE", "subjectId": str(employee.user_id), "role": "EMPLOYEE", "domain": "502"}, format="json"
    )
    assert outside.status_code == 403
    everywhere = merchant_admin.post(
        f"{API}/policies", {"kind": "ROLE", "subjectId": str(employee.user_id), "role": "ADMIN"}, format="json"
    )
    assert everywhere.status_code == 403
    listed = merchant_admin.get(f"{API}/policies").json()["results"]
    assert listed and {row["domain"] for row in listed} == {"501"}


def test_policy_input_is_validated():
    admin = make_caller(roles=["SUPER_ADMIN"]).client()
    unknown_role = admin.post(f"{API}/policies", {"kind": "ROLE", "subjectId": "12345", "role": "ROOT"}, format="json")
    assert unknown_role.status_code == 400 and unknown_role.json()["errors"][0]["field"] == "role"
    no_domain = admin.post(f"{API}/policies", {"kind": "JOIN_DOMAIN", "subjectId": "12345"}, format="json")
    assert no_domain.status_code == 400


def test_seeds_are_idempotent():
    seeds.run()
    assert seeds.run() == {"created": 0, "removed": 0}
    assert PolicyDefinition.objects.filter(source="identity", subject_id="OWNER", resource="identity.PolicyDefinition").exists()


def test_the_openapi_document_describes_the_auth_flows(client):
    response = client.get(f"{API}/doc/openapi.json")
    assert response.status_code == 200
    document = response.json()
    validate(document)
    paths = document["paths"]
    for path in ("/auth/sign-in", "/auth/sign-up", "/auth/refresh", "/auth/sign-out", "/auth/otp/verify-email/verify", "/users/me"):
        assert f"{API}{path}" in paths, path
    sign_in = paths[f"{API}/auth/sign-in"]["post"]
    assert sign_in["security"] == [{}]  # public
    assert paths[f"{API}/users/me"]["get"]["security"] == [{"bearerAuth": []}]
    assert "401" in sign_in["responses"] and "200" in sign_in["responses"]


def test_a_token_for_a_deleted_account_no_longer_reads_it(client):
    body = sign_up(client, email="gone@example.com")
    User.objects.get(email="gone@example.com").delete()
    response = client.get(f"{API}/users/me", **bearer(body["accessToken"]))
    assert response.status_code == 404
