"""Item 9: one JSON error shape (RFC 9457 problem details plus a stable code) for every failure,
never an HTML page."""

from __future__ import annotations

import base64

import pytest
from django.test import Client

from merchant_platform.errors import PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_BASE

pytestmark = pytest.mark.usefixtures("kernel_urls")


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE
    body = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"] == PROBLEM_TYPE_BASE + code.lower().replace("_", "-")
    assert body["title"] and body["detail"]
    assert body["requestId"] == response["X-Request-Id"]
    assert b"<html" not in response.content.lower()
    return body


def test_validation_error_names_each_field(client):
    response = client.post(
        "/kernel-test/validate", {"email": "not-an-email", "quantity": 0, "lines": [{"sku": "a"}, "oops"]}, content_type="application/json"
    )
    body = assert_problem(response, 400, "VALIDATION_ERROR")
    assert body["detail"] == "Invalid input: email, lines.1, quantity."
    fields = {(error["field"], error["code"]) for error in body["errors"]}
    assert ("email", "invalid") in fields
    assert ("quantity", "min_value") in fields
    assert ("lines.1", "not_a_dict") in fields
    missing = assert_problem(client.post("/kernel-test/validate", {}, content_type="application/json"), 400, "VALIDATION_ERROR")
    assert {(error["field"], error["code"]) for error in missing["errors"]} == {("email", "required"), ("quantity", "required")}


def test_malformed_json_is_a_400_naming_the_problem(client):
    body = assert_problem(client.post("/kernel-test/validate", '{"email": ', content_type="application/json"), 400, "MALFORMED_BODY")
    assert "JSON" in body["detail"]


def test_json_nested_past_what_the_parser_can_walk_is_a_400(client):
    # 2,000 nested arrays fit well under the 16 KiB public limit; Python's json gives up with a RecursionError.
    body = assert_problem(client.post("/kernel-test/validate", "[" * 2000, content_type="application/json"), 400, "MALFORMED_BODY")
    assert "nested" in body["detail"]


def test_wrong_content_type_is_415(client):
    body = assert_problem(client.post("/kernel-test/validate", "email=a", content_type="text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")
    assert "text/plain" in body["detail"]


def test_oversized_body_is_413(client, settings):
    settings.MAX_REQUEST_BODY_BYTES = 1024
    body = assert_problem(
        client.post("/kernel-test/validate", {"email": "a@b.co", "pad": "x" * 2000}, content_type="application/json"),
        413,
        "PAYLOAD_TOO_LARGE",
    )
    assert "limit is 1024 bytes" in body["detail"]
    # A view that reads the body itself is held to Django's upload limit, with the same answer.
    settings.MAX_REQUEST_BODY_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096, 100
    assert_problem(client.post("/kernel-test/plain-body-length", "x" * 500, content_type="text/plain"), 413, "PAYLOAD_TOO_LARGE")
    # A bogus Content-Length is refused before anything reads the body.
    assert_problem(client.generic("POST", "/kernel-test/validate", b"{}", CONTENT_LENGTH="-1"), 400, "BAD_CONTENT_LENGTH")


def test_missing_credentials_are_401_with_a_challenge(client):
    response = client.get("/kernel-test/service-only")
    assert_problem(response, 401, "UNAUTHENTICATED")
    assert response["WWW-Authenticate"] == 'Basic realm="services"'
    wrong = "Basic " + base64.b64encode(b"platform:wrong").decode()
    assert_problem(client.get("/kernel-test/service-only", headers={"Authorization": wrong}), 401, "UNAUTHENTICATED")


def test_forbidden_is_403(client):
    body = assert_problem(client.get("/kernel-test/forbidden"), 403, "FORBIDDEN")
    assert body["detail"] == "Nobody may read this."


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/kernel-test/plain-forbidden", 403, "FORBIDDEN"),
        ("/kernel-test/plain-missing", 404, "NOT_FOUND"),
        ("/kernel-test/plain-suspicious", 400, "BAD_REQUEST"),
    ],
)
def test_django_exceptions_outside_drf_keep_their_status(path, status, code):
    assert_problem(Client(raise_request_exception=False).get(path), status, code)


@pytest.mark.django_db(databases="__all__")
def test_not_found_is_404(client):
    body = assert_problem(client.get("/v1/api/outreach/no-such-route"), 404, "NOT_FOUND")
    assert body["detail"] == "No route for /v1/api/outreach/no-such-route."
    assert_problem(client.get("/no-such-page/"), 404, "NOT_FOUND")
    assert_problem(client.get("/kernel-test/widgets/123"), 404, "NOT_FOUND")


def test_wrong_method_is_405(client):
    response = client.post("/kernel-test/get-only", {}, content_type="application/json")
    body = assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert '"POST"' in body["detail"]


def test_throttled_is_429_with_retry_after(client):
    assert client.get("/kernel-test/throttled").status_code == 200
    response = client.get("/kernel-test/throttled")
    assert_problem(response, 429, "RATE_LIMITED")
    assert int(response["Retry-After"]) > 0


@pytest.mark.parametrize("path", ["/kernel-test/boom", "/kernel-test/plain-boom"])
def test_an_unhandled_exception_is_a_500_problem_without_internals(path):
    response = Client(raise_request_exception=False).get(path)
    body = assert_problem(response, 500, "INTERNAL_ERROR")
    assert body["detail"] == "The server failed to handle the request; it has been logged."
    assert "RuntimeError" not in response.content.decode()


def test_a_secret_sealed_under_another_key_is_a_clear_error(client):
    from merchant_platform import crypto

    token = crypto.encrypt("provider-password", secret="another-deployment's-secret")
    body = assert_problem(client.post("/kernel-test/decrypt", {"token": token}, content_type="application/json"), 500, "DECRYPT_FAILED")
    assert "APP_ENV_APPLICATION_SECRET" in body["detail"]
    assert "provider-password" not in str(body)


def test_extra_members_never_replace_the_standard_ones():
    from merchant_platform.errors import problem

    body = problem(409, code="LICENSE_INVALID_TRANSITION", detail="No.", status="ACTIVATED", code_="x", type="evil", action="renew")
    assert body["status"] == 409 and body["code"] == "LICENSE_INVALID_TRANSITION"
    assert body["type"] == PROBLEM_TYPE_BASE + "license-invalid-transition"
    assert body["action"] == "renew"


def test_service_domain_errors_render_as_problems():
    from rest_framework.test import APIRequestFactory
    from rest_framework.views import APIView

    from merchant_platform.errors import InvalidInput, NotFound, exception_handler

    view = APIView()
    request = APIRequestFactory().get("/")
    missing = exception_handler(NotFound("No license has this id."), {"view": view, "request": request})
    assert (missing.status_code, missing.data["code"], missing.data["detail"]) == (404, "NOT_FOUND", "No license has this id.")
    invalid = exception_handler(InvalidInput({"identifier": "Give an email."}), {"view": view, "request": request})
    assert invalid.status_code == 400 and invalid.data["code"] == "VALIDATION_ERROR"
    assert invalid.data["errors"] == [{"field": "identifier", "code": "invalid", "message": "Give an email."}]


def test_errors_of_a_list_of_objects_name_the_element():
    """DRF's ListSerializer reports {index: errors}: the first element is `lines.0.quantity`, as the
    second is `lines.1.quantity` (index 0 used to vanish: `lines.quantity`)."""
    from rest_framework import serializers

    from merchant_platform.errors import _flatten_validation
    from merchant_platform.serializers import BaseSerializer

    class Line(BaseSerializer):
        quantity = serializers.IntegerField(min_value=1)

    class Order(BaseSerializer):
        lines = Line(many=True)

    order = Order(data={"lines": [{"quantity": 0}, {"quantity": 0}, {"quantity": 1}]})
    assert not order.is_valid()
    assert [error["field"] for error in _flatten_validation(order.errors)] == ["lines.0.quantity", "lines.1.quantity"]
