"""A merchant's books in every currency it sells or buys in: the first system posting in a currency
(a SALE from payment.success, a COGS, a stock adjustment) opens the merchant's chart in that
currency, once, even when two consumers post the first one at the same time; reports keep the
currencies apart."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction
from rest_framework.exceptions import APIException

from apps.finance import selectors, services
from apps.finance.models import Account, Voucher
from tests.finance.conftest import books, invariant_violations, new_merchant_id
from tests.support.auth import make_caller

API = "/v1/api/finance"


def _usd(merchant_id: int) -> dict[str, Account]:
    return {a.system_role: a for a in Account.objects.filter(merchant_id=merchant_id, currency="USD")}


@pytest.mark.django_db(databases="__all__")
def test_a_sale_a_cogs_and_an_adjustment_in_a_second_currency_post_to_its_own_accounts():
    eur = books()
    merchant = eur["BANK"].merchant_id
    Account.objects.filter(merchant_id=merchant).update(created_by=42)  # the merchant's creator owns the chart
    # The sale side chose the merchant's (EUR) bank; the order was paid in USD.
    sale = services.sale_post_from_payment(
        finance_account_id=eur["BANK"].id, amount=2500, attempt_id="att-usd", merchant_id=merchant, currency="USD"
    )
    cogs = services.cogs_post(merchant_id=merchant, order_id="order-usd", currency="USD", amount=700)
    loss = services.inventory_adjustment_post(merchant_id=merchant, reference="CYCLE_COUNT:t-1", currency="USD", value=-50, reason="")
    usd = _usd(merchant)
    assert set(usd) == {role for _, _, _, role in services.DEFAULT_CHART}
    assert {a.created_by for a in usd.values()} == {42}
    lines = {(line.account_id, line.currency, line.debit, line.credit) for v in (sale, cogs, loss) for line in v.lines.all()}
    assert lines == {
        (usd["BANK"].id, "USD", 2500, 0),
        (usd["SALES"].id, "USD", 0, 2500),
        (usd["COGS"].id, "USD", 700, 0),
        (usd["INVENTORY"].id, "USD", 0, 700),
        (usd["INVENTORY_ADJUSTMENTS"].id, "USD", 50, 0),
        (usd["INVENTORY"].id, "USD", 0, 50),
    }
    assert all(Account.objects.get(pk=account.pk).balance == 0 for account in eur.values())
    # A replay finds the voucher; the chart is not made twice.
    assert services.cogs_post(merchant_id=merchant, order_id="order-usd", currency="USD", amount=700).id == cogs.id
    assert Account.objects.filter(merchant_id=merchant, currency="USD").count() == len(services.DEFAULT_CHART)
    report = selectors.trial_balance(merchant_id=merchant, as_of=sale.date)
    assert report["totals"] == [
        {"currency": "EUR", "debit": 0, "credit": 0},
        {"currency": "USD", "debit": 2500 + 700 + 50, "credit": 2500 + 700 + 50},
    ]
    assert invariant_violations([merchant]) == []


@pytest.mark.django_db(databases="__all__")
def test_a_merchant_finance_does_not_know_gets_no_chart_and_a_custom_account_keeps_its_currency():
    stranger = new_merchant_id()
    with pytest.raises(APIException) as raised:
        services.cogs_post(merchant_id=stranger, order_id="o-1", currency="USD", amount=10)
    assert raised.value.get_codes() == "CONTROL_ACCOUNT_MISSING"
    assert not Account.objects.filter(merchant_id=stranger).exists()
    eur = books()
    till = services.account_create(merchant_id=eur["CASH"].merchant_id, code="1020", name="Till", type="ASSET", currency="EUR")
    with pytest.raises(APIException) as raised:
        services.sale_post_from_payment(
            finance_account_id=till.id, amount=100, attempt_id="a-1", merchant_id=till.merchant_id, currency="USD"
        )
    assert raised.value.status_code == 400 and "currency" in raised.value.detail
    assert not Voucher.objects.filter(merchant_id=till.merchant_id).exists()


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_two_consumers_posting_the_first_usd_vouchers_at_once_make_one_chart():
    eur = books()
    merchant = eur["COGS"].merchant_id
    first_posted, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first():
        try:
            with transaction.atomic(using=services.DB):  # a consumer's batch transaction, still open
                services.cogs_post(merchant_id=merchant, order_id="o-1", currency="USD", amount=100)
                first_posted.set()
                release.wait(30)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            first_posted.set()
        finally:
            connections[services.DB].close()

    def second():
        try:
            services.cogs_post(merchant_id=merchant, order_id="o-2", currency="USD", amount=200)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections[services.DB].close()

    one = threading.Thread(target=first)
    one.start()
    assert first_posted.wait(30)
    two = threading.Thread(target=second)
    two.start()
    two.join(1)  # it waits on the first's uncommitted USD accounts
    release.set()
    one.join(30)
    two.join(30)
    assert errors == []
    assert Account.objects.filter(merchant_id=merchant, currency="USD").count() == len(services.DEFAULT_CHART)
    assert _usd(merchant)["COGS"].balance == 300
    assert invariant_violations([merchant]) == []


@pytest.mark.django_db(databases="__all__")
def test_the_trial_balance_over_http_shows_each_currency_apart(seeded):
    eur = books()
    merchant = eur["BANK"].merchant_id
    services.sale_post_from_payment(finance_account_id=eur["BANK"].id, amount=900, attempt_id="a-eur", merchant_id=merchant)
    services.sale_post_from_payment(finance_account_id=eur["BANK"].id, amount=400, attempt_id="a-usd", merchant_id=merchant, currency="USD")
    client = make_caller(roles=["OWNER"], merchants=[merchant]).client()
    report = client.get(f"{API}/reports/trial-balance", {"merchantId": str(merchant)}).json()
    assert report["totals"] == [{"currency": "EUR", "debit": 900, "credit": 900}, {"currency": "USD", "debit": 400, "credit": 400}]
    banks = {row["account"]["currency"]: row["balance"] for row in report["accounts"] if row["account"]["systemRole"] == "BANK"}
    assert banks == {"EUR": 900, "USD": 400}


@pytest.mark.django_db(databases="__all__")
def test_an_order_costed_in_two_currencies_gets_a_cogs_voucher_per_currency_once_each():
    """Inventory sends one inventory.cogs per cost currency of an order; each is booked once."""
    eur = books()
    merchant = eur["COGS"].merchant_id

    in_eur = services.cogs_post(merchant_id=merchant, order_id="order-2c", currency="EUR", amount=700)
    in_usd = services.cogs_post(merchant_id=merchant, order_id="order-2c", currency="USD", amount=300)

    assert in_eur.id != in_usd.id
    assert services.cogs_post(merchant_id=merchant, order_id="order-2c", currency="USD", amount=300).id == in_usd.id
    assert Voucher.objects.filter(merchant_id=merchant, kind="COGS").count() == 2
    assert Account.objects.get(pk=eur["COGS"].pk).balance == 700 and _usd(merchant)["COGS"].balance == 300
    assert invariant_violations([merchant]) == []
