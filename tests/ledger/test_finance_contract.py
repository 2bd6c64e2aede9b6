"""Ledger against the real finance service: finance's own general-ledger export, served over HTTP by
Django's live server (the all-in-one WSGI application), read with the platform's service
credentials. The documents equal finance's books line for line, and the export passes the schema
ledger validates (so the contract in docs/services/ledger.md is the one finance keeps)."""

from __future__ import annotations

import csv
import datetime
import io

import pytest
from openpyxl import load_workbook

from apps.finance import services as finance_services
from apps.finance.models import FinanceTransaction
from apps.ledger import services
from tests.finance.conftest import books, new_merchant_id, post
from tests.ledger.conftest import downloaded

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
BASE = "/v1/api/ledger/ledgers"


@pytest.fixture
def finance_books(live_server, settings, writable_bucket):
    settings.LEDGER_BUCKET = writable_bucket
    settings.LEDGER_FINANCE_URL = f"{live_server.url}/v1/api/finance"
    settings.LEDGER_FETCH_PAGE_SIZE = 7  # several pages, through finance's keyset cursor
    merchant = new_merchant_id()
    chart = books(merchant)
    accounts = list(chart.values())
    for day in range(1, 13):
        post(accounts[day % 2], accounts[2], 1000 + day, date=datetime.date(2025, 7, day), memo=f"July {day}")
    post(accounts[0], accounts[1], 55, date=datetime.date(2025, 8, 1))  # outside the period
    voided = post(accounts[1], accounts[0], 77, date=datetime.date(2025, 7, 20))
    finance_services.voucher_void(voucher_id=voided.id, memo="mistake")
    return merchant


def run(merchant: int, **fields):
    job = services.job_create(merchant_id=merchant, period="2025-07", **{"type": "GENERAL_LEDGER", "format": "CSV", **fields})
    services.job_run(ledger_id=job.id, run_id=str(services.job_start(ledger_id=job.id)))
    job.refresh_from_db()
    return job


def test_documents_from_finances_real_export_equal_its_books(finance_books, make_caller, seeded):
    merchant = finance_books
    owner = make_caller(roles=[("OWNER", merchant)], merchants=[merchant]).client()
    lines = FinanceTransaction.objects.filter(merchant_id=merchant, date__gte="2025-07-01", date__lte="2025-07-31").order_by("date", "id")
    expected = [(line.date.isoformat(), line.currency, line.debit, line.credit) for line in lines]
    assert len(expected) > 14  # the voucher, its reversal and the twelve days

    job = run(merchant)
    assert job.status == "COMPLETED", (job.error_code, job.error_message)
    content = downloaded(owner.get(f"{BASE}/{job.id}/download")).decode()
    rows = list(csv.reader(io.StringIO(content)))
    body = rows[rows.index([]) + 2 :]
    assert [(r[0], r[7], int(r[8]), int(r[9])) for r in body] == expected

    trial = run(merchant, type="TRIAL_BALANCE", format="XLSX")
    assert trial.status == "COMPLETED", (trial.error_code, trial.error_message)
    sheet = load_workbook(io.BytesIO(downloaded(owner.get(f"{BASE}/{trial.id}/download"))), read_only=True).active
    totals = [row for row in sheet.iter_rows(values_only=True) if row and row[0] == "TOTAL"]
    assert totals == [("TOTAL", None, None, "EUR", sum(e[2] for e in expected), sum(e[3] for e in expected), 0)]


def test_the_general_ledger_and_a_statement_list_a_refund_and_its_returned_cost(
    live_server, settings, writable_bucket, make_caller, seeded
):
    """A sale refunded in part (payment.refunded's REFUND voucher) and the cost of its restocked goods
    (inventory.returned's COGS_RETURN voucher), read from finance's real export: each line is in the
    documents with its kind and memo, and the books still balance."""
    settings.LEDGER_BUCKET = writable_bucket
    settings.LEDGER_FINANCE_URL = f"{live_server.url}/v1/api/finance"
    chart = books()
    merchant = chart["CASH"].merchant_id
    day = datetime.date(2025, 7, 10)
    finance_services.sale_post_from_payment(
        finance_account_id=chart["CASH"].id, merchant_id=merchant, amount=1200, tax_amount=200, attempt_id="att-1", date=day
    )
    finance_services.cogs_post(merchant_id=merchant, order_id="SO-1042", currency="EUR", amount=700, date=day)
    refund = finance_services.refund_post(
        refund_id=7391000000000001,
        transaction_id=7390172837500001,
        finance_account_id=chart["CASH"].id,
        merchant_id=merchant,
        amount=600,
        tax_amount=100,
        currency="EUR",
        reason="Arrived broken",
        date=day + datetime.timedelta(days=2),
    )
    finance_services.cogs_return_post(
        merchant_id=merchant,
        refund_id=7391000000000001,
        order_id="SO-1042",
        currency="EUR",
        amount=350,
        date=day + datetime.timedelta(days=2),
    )
    owner = make_caller(roles=[("OWNER", merchant)], merchants=[merchant]).client()

    job = run(merchant)
    assert job.status == "COMPLETED", (job.error_code, job.error_message)
    rows = list(csv.reader(io.StringIO(downloaded(owner.get(f"{BASE}/{job.id}/download")).decode())))
    body = rows[rows.index([]) + 2 :]
    by_kind = {}
    for row in body:  # Date, Voucher, Kind, Voucher status, Line, Account code, Account name, Currency, Debit, Credit, Memo
        by_kind.setdefault(row[2], []).append((row[5], int(row[8]), int(row[9]), row[10]))
    memo = "Refund 7391000000000001 of payment transaction 7390172837500001: Arrived broken"
    assert sorted(by_kind["REFUND"]) == [("1000", 0, 600, memo), ("2100", 100, 0, memo), ("4000", 500, 0, memo)]
    returned = "Cost of goods returned, refund 7391000000000001 of order SO-1042"
    assert sorted(by_kind["COGS_RETURN"]) == [("1200", 350, 0, returned), ("5000", 0, 350, returned)]
    assert {row[1] for row in body if row[2] == "REFUND"} == {refund.voucher_number}
    assert sum(int(row[8]) for row in body) == sum(int(row[9]) for row in body)

    statement = run(merchant, type="ACCOUNT_STATEMENT", account_id=chart["CASH"].id)
    assert statement.status == "COMPLETED", (statement.error_code, statement.error_message)
    rows = list(csv.reader(io.StringIO(downloaded(owner.get(f"{BASE}/{statement.id}/download")).decode())))
    body = rows[rows.index([]) + 2 :]  # Date, Voucher, Kind, Line, Memo, Currency, Debit, Credit, Running net
    assert [(r[2], r[4], int(r[6]), int(r[7]), int(r[8])) for r in body] == [
        ("SALE", "Payment attempt att-1", 1200, 0, 1200),
        ("REFUND", memo, 0, 600, 600),
    ]
