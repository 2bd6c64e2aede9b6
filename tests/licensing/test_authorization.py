"""Licensing's side of the authorization rules of issue 22 (the kernel's are in
tests/kernel/test_authorization.py)."""

from __future__ import annotations

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
