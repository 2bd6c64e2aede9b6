"""The OWNER rule (spec 5) on licensing: a seller (OWNER held everywhere) made CASHIER of another
merchant reads and validates that merchant's licenses as its cashiers do, but not their seats, and
frees none of them; the seats of the licenses it owns stay its own."""

from __future__ import annotations

import pytest

from apps.licensing import services
from apps.licensing.models import Activation
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/licensing"
MERCHANT = 9301


def seat_of(license) -> Activation:
    services.license_validate(license_id=license.id, fingerprint="till")
    return Activation.objects.get(license=license, fingerprint="till")


def test_a_seller_made_cashier_elsewhere_does_not_reach_that_merchants_seats(make_license):
    license = make_license(merchant_id=MERCHANT)
    seat = seat_of(license)
    seller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT)]).client()
    assert seller.get(f"{BASE}/licenses/{license.id}").status_code == 200  # CASHIER reads licenses
    assert seller.get(f"{BASE}/activations").json()["results"] == []
    assert seller.get(f"{BASE}/activations/{seat.id}").status_code == 404
    assert seller.delete(f"{BASE}/activations/{seat.id}").status_code == 404
    assert seller.post(f"{BASE}/licenses/{license.id}/actions/deactivate").status_code == 403
    assert Activation.objects.filter(pk=seat.pk).exists()


def test_a_seller_made_cashier_elsewhere_keeps_the_seats_of_its_own_license(make_license):
    seller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT)])
    seat = seat_of(make_license(merchant_id=MERCHANT, owner_id=seller.user_id))
    assert seller.client().delete(f"{BASE}/activations/{seat.id}").status_code == 204
