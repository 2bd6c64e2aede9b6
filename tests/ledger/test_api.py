"""Ledger over HTTP: enqueue through the outbox, list and read with filters, retry and regenerate
refused while in progress, download refused before COMPLETED, bad input naming the field, and
tenant isolation (another merchant's job is a 404 on every route)."""

from __future__ import annotations

import datetime
import json

import pytest
from django.utils import timezone

from apps.ledger.models import LedgerJob, OutboxMessage
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/ledger/ledgers"
MERCHANT, OTHER = 61_001, 61_002


@pytest.fixture
def owner(make_caller, seeded):
    return make_caller(roles=[("OWNER", MERCHANT)], merchants=[MERCHANT]).client()


def last_month() -> str:
    first = timezone.now().date().replace(day=1) - datetime.timedelta(days=1)
    return first.strftime("%Y-%m")


def enqueue(client, **body):
    return client.post(
        BASE, {"merchantId": str(MERCHANT), "type": "GENERAL_LEDGER", "format": "CSV", "period": last_month(), **body}, format="json"
    )


def test_enqueue_records_a_pending_job_and_publishes_ledger_generate_through_the_outbox(owner):
    response = enqueue(owner)

    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["status"] == "PENDING" and body["attemptCount"] == 0 and body["failureReason"] is None
    assert body["merchantId"] == str(MERCHANT) and body["type"] == "GENERAL_LEDGER" and body["format"] == "CSV"
    assert body["dateFrom"].endswith("-01") and body["queuedAt"]
    [row] = OutboxMessage.objects.filter(key=body["ledgerId"])
    assert row.topic == "ledger.generate" and json.loads(row.value) == {"ledgerId": body["ledgerId"]}
    assert "ledger.generate" in row.headers.values() and "ledger" in row.headers.values()  # event type, source
    assert row.sent_at is None  # relayed after the commit (or by the relay loop when the broker is back)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "BALANCE_SHEET"}, "type"),
        ({"format": "DOCX"}, "format"),
        ({"period": "2026/10"}, "period"),
        ({"period": "2026-13"}, "period"),
        ({"period": "2026-Q5"}, "period"),
        ({"period": "2999-01"}, "period"),
        ({"period": "2020-01-01..2021-06-30"}, "period"),
        ({"period": "2020-02-01..2020-01-01"}, "period"),
        ({"type": "ACCOUNT_STATEMENT"}, "accountId"),
        ({"accountId": "5"}, "accountId"),
        ({"merchantId": "x"}, "merchantId"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(owner, body, field):
    response = enqueue(owner, **body)

    assert response.status_code == 400, response.json()
    assert response["Content-Type"] == "application/problem+json"
    assert field in [error["field"] for error in response.json()["errors"]]
    assert not LedgerJob.objects.exists()


def test_quarter_and_custom_periods(owner, finance):
    finance.accounts[901000] = MERCHANT
    quarter = enqueue(owner, period="2025-Q4").json()
    assert (quarter["dateFrom"], quarter["dateTo"]) == ("2025-10-01", "2025-12-31")
    custom = enqueue(owner, period="2025-02-10..2025-03-09", type="ACCOUNT_STATEMENT", accountId="901000").json()
    assert (custom["dateFrom"], custom["dateTo"], custom["accountId"]) == ("2025-02-10", "2025-03-09", "901000")


def test_an_account_statement_of_another_merchants_account_or_none_is_a_400_and_queues_nothing(owner, finance):
    """The account is the caller's value: finance, asked with ledger's own account, says whose it is."""
    finance.accounts[902000] = OTHER

    for account in ("902000", "903000"):
        response = enqueue(owner, type="ACCOUNT_STATEMENT", accountId=account)

        assert response.status_code == 400, response.json()
        assert [error["field"] for error in response.json()["errors"]] == ["accountId"]
    assert not LedgerJob.objects.exists()


def test_an_account_statement_while_finance_cannot_answer_is_a_503_and_queues_nothing(owner, settings):
    settings.LEDGER_FINANCE_URL = f"http://127.0.0.1:{free_port()}/v1/api/finance"

    response = enqueue(owner, type="ACCOUNT_STATEMENT", accountId="901000")

    assert response.status_code == 503
    assert not LedgerJob.objects.exists()


def test_list_filters_and_reads(owner):
    first = enqueue(owner).json()
    enqueue(owner, format="PDF")
    LedgerJob.objects.filter(pk=first["ledgerId"]).update(
        status=LedgerJob.Status.REJECTED, error_code="FETCH_DATA_ERROR", error_message="bad"
    )

    newest_first = owner.get(BASE).json()["results"]
    assert [job["format"] for job in newest_first] == ["PDF", "CSV"]
    listed = owner.get(BASE, {"fileFormat": "PDF"}).json()
    assert [job["format"] for job in listed["results"]] == ["PDF"]
    rejected = owner.get(BASE, {"status": "REJECTED"}).json()["results"]
    assert [job["ledgerId"] for job in rejected] == [first["ledgerId"]]
    read = owner.get(f"{BASE}/{first['ledgerId']}").json()
    assert read["failureReason"] == {"errorCode": "FETCH_DATA_ERROR", "message": "bad"}
    assert owner.get(BASE, {"status": "LOST"}).status_code == 400


def test_retry_and_regenerate_answer_job_in_progress_while_pending_or_processing(owner):
    job = enqueue(owner).json()
    for status in ("PENDING", "PROCESSING"):
        LedgerJob.objects.filter(pk=job["ledgerId"]).update(status=status)
        for route in ("retry", "regenerate"):
            response = owner.post(f"{BASE}/{job['ledgerId']}/{route}")
            assert response.status_code == 409, (status, route)
            assert response.json()["code"] == "JOB_IN_PROGRESS"


def test_retry_requeues_a_rejected_job_and_regenerate_only_a_completed_draft(owner):
    job = enqueue(owner).json()
    LedgerJob.objects.filter(pk=job["ledgerId"]).update(status="REJECTED", error_code="JOB_EXECUTION_FAILED", attempt_count=1)
    assert owner.post(f"{BASE}/{job['ledgerId']}/regenerate").json()["code"] == "LEDGER_NOT_DRAFT"
    retried = owner.post(f"{BASE}/{job['ledgerId']}/retry")
    assert retried.status_code == 202
    assert retried.json()["status"] == "PENDING" and retried.json()["failureReason"] is None
    assert OutboxMessage.objects.filter(key=job["ledgerId"]).count() == 2
    LedgerJob.objects.filter(pk=job["ledgerId"]).update(status="COMPLETED", draft=False)
    assert owner.post(f"{BASE}/{job['ledgerId']}/retry").json()["code"] == "JOB_NOT_FAILED"
    assert owner.post(f"{BASE}/{job['ledgerId']}/regenerate").json()["code"] == "LEDGER_NOT_DRAFT"


def test_download_before_completed_is_job_not_ready(owner):
    job = enqueue(owner).json()
    response = owner.get(f"{BASE}/{job['ledgerId']}/download")
    assert response.status_code == 409
    assert response.json()["code"] == "JOB_NOT_READY"


def test_another_merchants_job_is_a_404_on_every_route(owner, make_caller, seeded):
    job = enqueue(owner).json()
    stranger = make_caller(roles=[("OWNER", OTHER)], merchants=[OTHER]).client()
    for method, path in [
        ("get", f"{BASE}/{job['ledgerId']}"),
        ("get", f"{BASE}/{job['ledgerId']}/download"),
        ("post", f"{BASE}/{job['ledgerId']}/retry"),
        ("post", f"{BASE}/{job['ledgerId']}/regenerate"),
    ]:
        assert getattr(stranger, method)(path).status_code == 404, path
    assert stranger.get(BASE).json()["results"] == []
    refused = stranger.post(
        BASE, {"merchantId": str(MERCHANT), "type": "GENERAL_LEDGER", "format": "CSV", "period": last_month()}, format="json"
    )
    assert refused.status_code == 403
    assert LedgerJob.objects.count() == 1


def test_an_employee_reads_but_does_not_order(make_caller, owner, seeded):
    job = enqueue(owner).json()
    employee = make_caller(roles=[("EMPLOYEE", MERCHANT)], merchants=[MERCHANT]).client()
    assert employee.get(f"{BASE}/{job['ledgerId']}").status_code == 200
    assert enqueue(employee).status_code == 403
    assert employee.post(f"{BASE}/{job['ledgerId']}/retry").status_code == 403


def test_every_route_requires_authentication(client):
    for method, path in [("get", BASE), ("post", BASE), ("get", f"{BASE}/1"), ("get", f"{BASE}/1/download"), ("post", f"{BASE}/1/retry")]:
        assert getattr(client, method)(path).status_code == 401, path
