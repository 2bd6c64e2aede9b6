"""The OWNER rule (spec 5) on identity: a seller (OWNER held everywhere) made CASHIER of another
merchant does not read that merchant's policies (its cashiers do not)."""

from __future__ import annotations

import pytest

from apps.identity import seeds
from merchant_platform import policy
from tests.identity.conftest import API
from tests.support.auth import make_caller, random_user_id

pytestmark = pytest.mark.django_db(databases="__all__")
MERCHANT = 9_501


def test_a_seller_made_cashier_elsewhere_does_not_read_that_merchants_policies():
    seeds.run()
    staff = policy.policy_grant_role(user_id=random_user_id(), role="EMPLOYEE", domain=MERCHANT)
    seller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT)]).client()
    assert seller.get(f"{API}/policies/{staff.pk}").status_code == 404
    assert str(staff.pk) not in {row["id"] for row in seller.get(f"{API}/policies", {"pageSize": 200}).json()["results"]}
    assert seller.delete(f"{API}/policies/{staff.pk}").status_code == 404


def test_a_seller_reads_the_policies_of_the_merchant_it_joined():
    seeds.run()
    staff = policy.policy_grant_role(user_id=random_user_id(), role="EMPLOYEE", domain=MERCHANT + 1)
    seller = make_caller(roles=["OWNER"], merchants=[MERCHANT + 1]).client()
    assert seller.get(f"{API}/policies/{staff.pk}").status_code == 200


def test_a_seller_made_a_plain_member_elsewhere_does_not_read_that_merchants_policies():
    seeds.run()
    staff = policy.policy_grant_role(user_id=random_user_id(), role="EMPLOYEE", domain=MERCHANT + 2)
    seller = make_caller(roles=["OWNER"], joined=[MERCHANT + 2]).client()
    assert seller.get(f"{API}/policies/{staff.pk}").status_code == 404
