"""The OWNER rule (spec 5) on ledger: a seller (OWNER held everywhere) made CASHIER of another
merchant does not read, download or order that merchant's documents (its cashiers do not)."""

from __future__ import annotations

import pytest

from apps.ledger import services
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/ledger/ledgers"
MERCHANT = 61_301


def test_a_seller_made_cashier_elsewhere_does_not_reach_that_merchants_ledgers(seeded):
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period="2025-01")
    seller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT)]).client()
    assert seller.get(BASE).json()["results"] == []
    assert seller.get(f"{BASE}/{job.id}").status_code == 404
    assert seller.post(f"{BASE}/{job.id}/retry").status_code == 404
    body = {"merchantId": str(MERCHANT), "type": "GENERAL_LEDGER", "format": "CSV", "period": "2025-01"}
    assert seller.post(BASE, body, format="json").status_code == 403


def test_a_seller_reads_the_ledgers_of_the_merchant_it_joined(seeded):
    job = services.job_create(merchant_id=MERCHANT + 1, type="GENERAL_LEDGER", format="CSV", period="2025-01")
    seller = make_caller(roles=["OWNER"], merchants=[MERCHANT + 1]).client()
    assert seller.get(f"{BASE}/{job.id}").status_code == 200


def test_a_seller_made_a_plain_member_elsewhere_does_not_read_that_merchants_ledgers(seeded):
    job = services.job_create(merchant_id=MERCHANT + 2, type="GENERAL_LEDGER", format="CSV", period="2025-01")
    seller = make_caller(roles=["OWNER"], joined=[MERCHANT + 2]).client()
    assert seller.get(f"{BASE}/{job.id}").status_code == 404
