"""Item 13 and the Performance section: the middleware only browsers need (WhiteNoise, sessions,
CSRF, auth, messages, clickjacking) runs under /admin and /static/ only
(merchant_platform.middleware.BrowserMiddleware); the admin still works and stays CSRF-protected,
and the APIs carry no session or CSRF state."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

PASSWORD = "operator-password-123"


@pytest.fixture
def csrf_client() -> Client:
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def operator(db):
    return get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)


@pytest.mark.django_db(databases="__all__")
def test_the_admin_login_page_works(csrf_client):
    response = csrf_client.get("/admin/login/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert response["X-Frame-Options"] == "DENY"
    assert "csrftoken" in response.cookies


@pytest.mark.django_db(databases="__all__")
def test_an_operator_signs_in_with_the_csrf_token_and_sees_the_admin(csrf_client, operator):
    csrf_client.get("/admin/login/")
    token = csrf_client.cookies["csrftoken"].value
    response = csrf_client.post(
        "/admin/login/", {"username": "operator", "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/admin/"}
    )
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert "sessionid" in response.cookies

    index = csrf_client.get("/admin/")
    assert index.status_code == 200
    assert b"operator" in index.content


@pytest.mark.django_db(databases="__all__")
def test_an_admin_post_without_the_csrf_token_is_refused(csrf_client, operator):
    csrf_client.get("/admin/login/")
    response = csrf_client.post("/admin/login/", {"username": "operator", "password": PASSWORD, "next": "/admin/"})
    assert response.status_code == 403
    assert "sessionid" not in response.cookies


@pytest.mark.django_db(databases="__all__")
def test_a_signed_in_admin_post_without_the_csrf_token_is_refused(csrf_client, operator):
    csrf_client.force_login(operator)
    response = csrf_client.post("/admin/logout/")
    assert response.status_code == 403
    assert csrf_client.get("/admin/").status_code == 200  # still signed in


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize("path", ["/healthz", "/v1/api/outreach/healthz", "/v1/api/nowhere"])
def test_api_requests_carry_no_session_or_csrf_state(csrf_client, operator, path):
    csrf_client.force_login(operator)  # a browser that holds an admin session calls an API
    response = csrf_client.get(path)
    assert not response.cookies
    assert "Cookie" not in response.get("Vary", "")
    assert "X-Frame-Options" not in response
    assert not hasattr(response.wsgi_request, "session")
    assert not hasattr(response.wsgi_request, "user")


@pytest.mark.django_db(databases="__all__")
def test_an_api_post_needs_no_csrf_token(csrf_client):
    response = csrf_client.post("/v1/api/outreach/healthz", {})
    assert response.status_code == 200  # the probe's answer, not CSRF's 403
