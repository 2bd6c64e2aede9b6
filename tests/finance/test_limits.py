"""The money limits of merchant_platform/money.py in finance: one amount at most MAX_AMOUNT (400
AMOUNT_TOO_LARGE), no balance past +-MAX_BALANCE (409 BALANCE_LIMIT_EXCEEDED naming the account,
nothing written), and CHECK constraints holding both in the tables."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from rest_framework.exceptions import APIException

from apps.finance import services
from apps.finance.models import Account, FinanceTransaction, Voucher
from merchant_platform.money import AMOUNT_TOO_LARGE, BALANCE_LIMIT_EXCEEDED, MAX_AMOUNT, MAX_BALANCE
from tests.finance.conftest import books
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
API = "/v1/api/finance"


def _lines(debit_account, credit_account, amounts):
    return [{"account_id": debit_account.id, "debit": a} for a in amounts] + [
        {"account_id": credit_account.id, "credit": a} for a in amounts
    ]


def test_one_amount_over_max_amount_is_400_amount_too_large():
    chart = books()
    with pytest.raises(APIException) as raised:
        services.voucher_post(
            merchant_id=chart["CASH"].merchant_id, kind="SALE", lines=_lines(chart["CASH"], chart["SALES"], [MAX_AMOUNT + 1])
        )
    assert (raised.value.status_code, raised.value.code) == (400, AMOUNT_TOO_LARGE)
    assert raised.value.extra["errors"][0]["field"] == "lines.0.debit"
    assert services.voucher_post(
        merchant_id=chart["CASH"].merchant_id, kind="SALE", lines=_lines(chart["CASH"], chart["SALES"], [MAX_AMOUNT])
    )


def test_a_posting_past_max_balance_is_refused_naming_the_account_and_writes_nothing():
    chart = books()
    merchant = chart["CASH"].merchant_id
    services.voucher_post(merchant_id=merchant, kind="SALE", lines=_lines(chart["CASH"], chart["SALES"], [MAX_AMOUNT] * 9))
    with pytest.raises(APIException) as raised:
        services.voucher_post(
            merchant_id=merchant, kind="SALE", lines=_lines(chart["CASH"], chart["SALES"], [MAX_BALANCE - 9 * MAX_AMOUNT + 1])
        )
    assert (raised.value.status_code, raised.value.code) == (409, BALANCE_LIMIT_EXCEEDED)
    assert raised.value.extra["accountId"] in (str(chart["CASH"].id), str(chart["SALES"].id))
    assert Voucher.objects.filter(merchant_id=merchant).count() == 1
    assert Account.objects.get(pk=chart["CASH"].pk).balance == 9 * MAX_AMOUNT
    # Exactly at the limit posts; the other way (a debit balance below -MAX_BALANCE) is refused too.
    services.voucher_post(merchant_id=merchant, kind="SALE", lines=_lines(chart["CASH"], chart["SALES"], [MAX_BALANCE - 9 * MAX_AMOUNT]))
    assert Account.objects.get(pk=chart["CASH"].pk).balance == MAX_BALANCE
    with pytest.raises(APIException) as raised:
        services.voucher_post(
            merchant_id=merchant,
            kind="PAYMENT",
            lines=_lines(chart["SALES"], chart["BANK"], [MAX_AMOUNT] * 9 + [MAX_BALANCE - 9 * MAX_AMOUNT + 1]),
        )
    assert raised.value.extra["accountId"] == str(chart["BANK"].id)


def test_a_sale_event_past_max_balance_is_refused_with_the_code(seeded):
    chart = books()
    merchant = chart["BANK"].merchant_id
    services.voucher_post(merchant_id=merchant, kind="SALE", lines=_lines(chart["BANK"], chart["SALES"], [MAX_AMOUNT] * 9))
    with pytest.raises(APIException) as raised:
        services.sale_post_from_payment(finance_account_id=chart["BANK"].id, amount=MAX_AMOUNT, attempt_id="a-big", merchant_id=merchant)
    assert raised.value.code == BALANCE_LIMIT_EXCEEDED
    assert not Voucher.objects.filter(source_id="a-big").exists()


def test_over_http_409_balance_limit_exceeded_and_400_amount_too_large(seeded):
    chart = books()
    merchant = chart["CASH"].merchant_id
    client = make_caller(roles=["OWNER"], merchants=[merchant]).client()

    def body(amounts):
        return {
            "merchantId": str(merchant),
            "kind": "SALE",
            "lines": [{"accountId": str(chart["CASH"].id), "debit": a} for a in amounts]
            + [{"accountId": str(chart["SALES"].id), "credit": a} for a in amounts],
        }

    too_large = client.post(f"{API}/vouchers", body([MAX_AMOUNT + 1]), format="json")
    assert (too_large.status_code, too_large.json()["code"]) == (400, AMOUNT_TOO_LARGE)
    assert too_large.json()["errors"][0]["field"] == "lines.0.debit"
    assert client.post(f"{API}/vouchers", body([MAX_AMOUNT] * 9), format="json").status_code == 201
    refused = client.post(f"{API}/vouchers", body([MAX_AMOUNT]), format="json")
    assert (refused.status_code, refused.json()["code"]) == (409, BALANCE_LIMIT_EXCEEDED)
    assert refused.json()["accountId"] in (str(chart["CASH"].id), str(chart["SALES"].id))
    assert Voucher.objects.filter(merchant_id=merchant).count() == 1


def test_the_tables_hold_the_limits():
    chart = books()
    with pytest.raises(IntegrityError), transaction.atomic(using=services.DB):
        Account.objects.filter(pk=chart["CASH"].pk).update(balance=MAX_BALANCE + 1)
    with pytest.raises(IntegrityError), transaction.atomic(using=services.DB):
        Account.objects.filter(pk=chart["CASH"].pk).update(balance=-MAX_BALANCE - 1)
    voucher = services.voucher_post(merchant_id=chart["CASH"].merchant_id, kind="SALE", lines=_lines(chart["CASH"], chart["SALES"], [5]))
    line = voucher.lines.first()
    for change in ({"debit": MAX_AMOUNT + 1}, {"balance_after": MAX_BALANCE + 1}):
        row = {
            "voucher_id": voucher.id, "line_number": 9, "merchant_id": line.merchant_id, "account_id": line.account_id,
            "currency": "EUR", "debit": 1, "credit": 0, "posting_sequence": 99, "balance_after": 0, "date": line.date,
        }  # fmt: skip
        with pytest.raises(IntegrityError), transaction.atomic(using=services.DB):
            FinanceTransaction.objects.create(**{**row, **change})
