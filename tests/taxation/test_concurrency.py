"""Provisioning under concurrency: one ACTIVE tax set per product whatever the interleaving
(the partial unique index, and the service running again when it lost the race)."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connections

from apps.taxation import services
from apps.taxation.models import TaxSet
from tests.taxation.conftest import MERCHANT

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def _race(product_id: int, group_ids: list[int]) -> tuple[list[str], list[BaseException]]:
    """Provision the product with each group from its own thread, all released at once."""
    barrier = threading.Barrier(len(group_ids))
    outcomes: list[str] = []
    failures: list[BaseException] = []

    def provision(group_id: int) -> None:
        try:
            barrier.wait()
            outcomes.append(services.tax_set_provision(product_id=product_id, tax_group_id=group_id).outcome)
        except BaseException as exc:  # reported by the test
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=provision, args=(group_id,)) for group_id in group_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes, failures


def test_concurrent_provisionings_of_one_product_leave_one_active_set():
    group_ids = [
        services.tax_group_create(merchant_id=MERCHANT, name=f"g{index}", items=[{"name": "VAT", "rate": Decimal(index + 1)}]).id
        for index in range(4)
    ]
    for product_id in range(7_000, 7_005):
        outcomes, failures = _race(product_id, group_ids)
        assert not failures, failures
        assert outcomes == [services.PROVISIONED] * len(group_ids)
        assert TaxSet.objects.filter(product_id=product_id, status=TaxSet.Status.ACTIVE).count() == 1
        assert TaxSet.objects.filter(product_id=product_id).count() == len(group_ids)
