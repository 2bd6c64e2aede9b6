"""The generation pipeline on the real components it talks to: finance's export over real HTTP (a
server speaking its contract), SeaweedFS through the S3 API, PostgreSQL. The documents downloaded
through the API hold exactly what finance's books hold (CSV and XLSX parsed, the PDF's text
extracted); the stored object is ciphertext; a broken export is FETCH_DATA_ERROR, storage down is
JOB_EXECUTION_FAILED and a retry then succeeds; the sweep returns a stalled job and only one run may
complete it."""

from __future__ import annotations

import csv
import datetime
import io
import threading
import uuid

import pytest
from django.db import connections
from django.utils import timezone
from openpyxl import load_workbook
from pypdf import PdfReader

from apps.ledger import services, storage
from apps.ledger.models import LedgerJob, OutboxMessage
from tests.ledger.conftest import account_id, downloaded, make_books

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/ledger/ledgers"
MERCHANT = 62_001
CLOSED = "2025-10"  # a closed month
START = datetime.date(2025, 10, 1)


@pytest.fixture
def owner(make_caller, seeded):
    return make_caller(roles=[("OWNER", MERCHANT)], merchants=[MERCHANT]).client()


def generate(**fields) -> LedgerJob:
    """Enqueue, start and run one job in this process (the bridge and the task's calls)."""
    job = services.job_create(**{"merchant_id": MERCHANT, "type": "GENERAL_LEDGER", "format": "CSV", "period": CLOSED, **fields})
    run_id = services.job_start(ledger_id=job.id)
    services.job_run(ledger_id=job.id, run_id=str(run_id))
    job.refresh_from_db()
    return job


def stale(*ledger_ids: int, minutes: int) -> None:
    """The run started `minutes` ago and its worker has not been heard of since."""
    then = timezone.now() - datetime.timedelta(minutes=minutes)
    LedgerJob.objects.filter(pk__in=ledger_ids).update(started_at=then, heartbeat_at=then)


def events(caplog) -> list[dict]:
    return [record.msg for record in caplog.records if isinstance(record.msg, dict)]


def csv_rows(content: bytes) -> tuple[dict, list[list[str]]]:
    lines = list(csv.reader(io.StringIO(content.decode())))
    blank = lines.index([])
    return dict(lines[:blank]), lines[blank + 1 :]


def test_general_ledger_csv_holds_finances_books_and_is_encrypted_at_rest(finance, owner, caplog, settings):
    books = make_books(MERCHANT, vouchers=1200, start=START, days=31)  # 2,400 lines: several export pages
    finance.books[MERCHANT] = books
    settings.LEDGER_FETCH_PAGE_SIZE = 500

    job = generate()

    assert job.status == "COMPLETED" and job.attempt_count == 1 and not job.draft
    assert len(finance.requests) == 5 and all(r["limit"] == "500" for r in finance.requests)
    response = owner.get(f"{BASE}/{job.id}/download")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"] == f'attachment; filename="general-ledger-{MERCHANT}-{CLOSED}-final.csv"'
    heading, rows = csv_rows(downloaded(response))
    assert heading["Status"].startswith("FINAL") and heading["Merchant"] == str(MERCHANT)
    assert rows[0][0] == "Date" and len(rows) == 1 + len(books)
    expected = [[e["date"], e["voucherNumber"], e["accountCode"], e["currency"], str(e["debit"]), str(e["credit"])] for e in books]
    assert [[r[0], r[1], r[5], r[7], r[8], r[9]] for r in rows[1:]] == expected
    # The object in S3 is ciphertext under the job's data key: no line of the document is in it.
    stored = storage.read(job.object_key)
    assert stored.startswith(b"MPLEDGER2") and b"V-2025-000001" not in stored and b"Cash" not in stored
    assert str(MERCHANT) in job.object_key and job.wrapped_key.startswith("v1.")
    # No response names the object storage; the phases are logged with the job id.
    body = owner.get(f"{BASE}/{job.id}").content
    assert settings.S3_ENDPOINT_URL.encode() not in body and job.object_key.encode() not in body
    phases = [e["phase"] for e in events(caplog) if e.get("event") == "ledger.pipeline" and e["ledgerId"] == str(job.id)]
    assert phases == ["FETCH_STARTED", "GENERATE_STARTED", "FETCH_DONE", "GENERATE_DONE", "UPLOAD_DONE", "COMPLETED"]
    logged = " ".join(str(e) for e in events(caplog))
    assert settings.S3_ENDPOINT_URL not in logged and job.object_key not in logged


def test_xlsx_trial_balance_and_pdf_statement_match_the_books(finance, owner):
    books = make_books(MERCHANT, vouchers=300, start=START, days=31)
    finance.books[MERCHANT] = books

    trial = generate(type="TRIAL_BALANCE", format="XLSX")
    response = owner.get(f"{BASE}/{trial.id}/download")
    assert response["Content-Type"] == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    sheet = load_workbook(io.BytesIO(downloaded(response)), read_only=True).active
    values = [row for row in sheet.iter_rows(values_only=True)]
    header = values.index(("Account code", "Account name", "Account type", "Currency", "Debit", "Credit", "Net (debit - credit)"))
    totals = {}
    for entry in books:
        total = totals.setdefault(entry["accountCode"], [0, 0])
        total[0] += entry["debit"]
        total[1] += entry["credit"]
    body = {row[0]: (row[4], row[5]) for row in values[header + 1 :]}
    assert {code: tuple(t) for code, t in totals.items()} == {k: v for k, v in body.items() if k != "TOTAL"}
    assert body["TOTAL"][0] == body["TOTAL"][1] == sum(e["debit"] for e in books)

    statement = generate(type="ACCOUNT_STATEMENT", format="PDF", account_id=int(account_id("1000")))
    response = owner.get(f"{BASE}/{statement.id}/download")
    content = downloaded(response)
    assert response["Content-Type"] == "application/pdf" and content.startswith(b"%PDF")
    text = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages)
    cash = [e for e in books if e["accountCode"] == "1000"]
    assert "Account statement" in text and "FINAL" in text and "DRAFT" not in text
    for entry in cash:
        assert entry["voucherNumber"] in text
    assert str(sum(e["debit"] - e["credit"] for e in cash)) in text
    assert not any(e["voucherNumber"] in text for e in books if e["accountCode"] == "5000")


def test_an_open_period_is_a_draft_on_its_face_and_regenerates(finance, owner):
    today = timezone.now().date()
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=4, start=today.replace(day=1), days=1)
    job = generate(period=today.strftime("%Y-%m"), format="PDF")
    assert job.draft and job.status == "COMPLETED"
    text = PdfReader(io.BytesIO(downloaded(owner.get(f"{BASE}/{job.id}/download")))).pages[0].extract_text()
    assert "DRAFT" in text
    first_key = job.object_key

    finance.books[MERCHANT] += make_books(MERCHANT, vouchers=6, start=today.replace(day=1), days=1)[8:]
    assert owner.post(f"{BASE}/{job.id}/regenerate").json()["status"] == "PENDING"
    services.job_run(ledger_id=job.id, run_id=str(services.job_start(ledger_id=job.id)))
    job.refresh_from_db()
    assert job.status == "COMPLETED" and job.attempt_count == 2 and job.object_key != first_key
    with pytest.raises(storage.StorageFailed):
        storage.read(first_key)  # the replaced draft is gone


@pytest.mark.parametrize(
    "tamper",
    [
        lambda body: {**body, "entries": [{**e, "debit": "12.50"} for e in body["entries"]]},
        lambda body: {**body, "entries": [{k: v for k, v in e.items() if k != "currency"} for e in body["entries"]]},
        lambda body: {**body, "merchantId": "1"},
        lambda body: {k: v for k, v in body.items() if k != "nextCursor"},
        lambda body: ["not", "a", "page"],
    ],
)
def test_an_export_that_breaks_its_schema_is_fetch_data_error(finance, tamper):
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=3, start=START)
    finance.tamper = tamper

    job = generate()

    assert job.status == "REJECTED" and job.error_code == "FETCH_DATA_ERROR" and job.failed_at
    assert job.object_key == "" and job.wrapped_key == ""


def test_an_export_refusing_the_credentials_is_fetch_data_error(finance, settings):
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=3, start=START)
    finance.expected_password = "finance-knows-another-password"

    job = generate()

    assert job.status == "REJECTED" and job.error_code == "FETCH_DATA_ERROR"
    assert "401" in job.error_message


def test_storage_down_fails_the_job_and_a_retry_succeeds(finance, owner, settings):
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=10, start=START)
    settings.S3_ENDPOINT_URL = "http://127.0.0.1:9"  # nothing listens there

    job = generate()

    assert job.status == "REJECTED" and job.error_code == "JOB_EXECUTION_FAILED"
    assert "127.0.0.1" not in job.error_message
    assert job.object_key == "" and job.wrapped_key == ""  # the job names no object of the failed run
    settings.S3_ENDPOINT_URL = "http://127.0.0.1:8333"
    assert owner.post(f"{BASE}/{job.id}/retry").status_code == 202
    services.job_run(ledger_id=job.id, run_id=str(services.job_start(ledger_id=job.id)))
    job.refresh_from_db()
    assert job.status == "COMPLETED" and job.attempt_count == 2 and job.error_code == ""
    assert owner.get(f"{BASE}/{job.id}/download").status_code == 200


def test_the_sweep_returns_a_stalled_job_and_the_stalled_run_cannot_complete_it(finance, caplog):
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=10, start=START)
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED)
    stalled_run = services.job_start(ledger_id=job.id)
    stale(job.id, minutes=30)
    fresh = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED)
    services.job_start(ledger_id=fresh.id)

    assert services.job_sweep(timeout_ms=15 * 60 * 1000) == 1
    assert [e["stalled"] for e in events(caplog) if e.get("event") == "ledger.sweep"] == [1]
    job.refresh_from_db()
    fresh.refresh_from_db()
    assert job.status == "PENDING" and fresh.status == "PROCESSING"
    assert OutboxMessage.objects.filter(key=str(job.id)).count() == 2  # published again
    assert services.job_sweep(timeout_ms=15 * 60 * 1000) == 0

    # The stalled run wakes up: it no longer owns the job and changes nothing.
    assert services.job_run(ledger_id=job.id, run_id=str(stalled_run)) is False
    new_run = services.job_start(ledger_id=job.id)
    assert services.job_start(ledger_id=job.id) is None  # a duplicate message starts nothing
    assert services.job_run(ledger_id=job.id, run_id=str(new_run)) is True
    job.refresh_from_db()
    assert job.status == "COMPLETED" and job.attempt_count == 2


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_long_run_that_keeps_its_heartbeat_is_not_taken_back(finance, settings):
    """A job that genuinely takes longer than the timeout: its worker refreshes the heartbeat while
    it renders, so the sweep (here while finance answers the second page) leaves it alone."""
    settings.LEDGER_FETCH_PAGE_SIZE, settings.LEDGER_HEARTBEAT_INTERVAL_MS = 10, 0
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=20, start=START)
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED)
    run_id = services.job_start(ledger_id=job.id)
    stale(job.id, minutes=60)  # started an hour ago, and nothing heard since: until the run beats
    seen = {}

    def sweep_during_the_run(page: int) -> None:
        if page == 2:
            seen["heartbeat"] = LedgerJob.objects.get(pk=job.id).heartbeat_at
            seen["swept"] = services.job_sweep(timeout_ms=15 * 60 * 1000)
            connections["ledger"].close()

    finance.on_page = sweep_during_the_run
    assert services.job_run(ledger_id=job.id, run_id=str(run_id)) is True
    assert seen["heartbeat"] > timezone.now() - datetime.timedelta(minutes=15)
    assert seen["swept"] == 0
    job.refresh_from_db()
    assert job.status == "COMPLETED" and job.attempt_count == 1


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_run_whose_job_was_taken_back_stops_and_leaves_the_newer_run_alone(finance, settings, caplog):
    settings.LEDGER_FETCH_PAGE_SIZE, settings.LEDGER_HEARTBEAT_INTERVAL_MS = 10, 0
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=20, start=START)
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED)
    old_run = services.job_start(ledger_id=job.id)
    seen = {}

    def take_back_and_restart(page: int) -> None:
        if page == 2:  # the old run's worker looked dead for a while: swept, and a new run starts
            stale(job.id, minutes=60)
            seen["swept"] = services.job_sweep(timeout_ms=15 * 60 * 1000)
            seen["new_run"] = services.job_start(ledger_id=job.id)
            connections["ledger"].close()

    finance.on_page = take_back_and_restart
    assert services.job_run(ledger_id=job.id, run_id=str(old_run)) is False
    assert seen["swept"] == 1
    job.refresh_from_db()
    assert job.status == "PROCESSING" and job.run_id == seen["new_run"] and job.attempt_count == 2
    assert [e["runId"] for e in events(caplog) if e.get("event") == "ledger.run_lost"] == [str(old_run)]
    assert not [e for e in events(caplog) if e.get("phase") in ("UPLOAD_DONE", "FAILED")]

    finance.on_page = None
    assert services.job_run(ledger_id=job.id, run_id=str(seen["new_run"])) is True
    job.refresh_from_db()
    assert job.status == "COMPLETED" and job.object_key == services.object_key(job, seen["new_run"])
    listed = storage.client().list_objects_v2(Bucket=settings.LEDGER_BUCKET, Prefix=f"merchants/{MERCHANT}/ledgers/{job.id}/")
    assert [item["Key"] for item in listed.get("Contents", [])] == [job.object_key]


def test_a_job_that_stalls_on_every_attempt_ends_rejected(settings, caplog):
    """The sweep takes a job back at most LEDGER_MAX_ATTEMPTS - 1 times per request; then the job is
    REJECTED with JOB_EXECUTION_FAILED rather than started again for ever. A retry asks afresh."""
    settings.LEDGER_MAX_ATTEMPTS = 2
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED)
    services.job_start(ledger_id=job.id)
    stale(job.id, minutes=30)
    assert services.job_sweep(timeout_ms=15 * 60 * 1000) == 1
    job.refresh_from_db()
    assert job.status == "PENDING"

    services.job_start(ledger_id=job.id)
    stale(job.id, minutes=30)
    assert services.job_sweep(timeout_ms=15 * 60 * 1000) == 1
    job.refresh_from_db()
    assert (job.status, job.error_code, job.attempt_count, job.run_id) == ("REJECTED", "JOB_EXECUTION_FAILED", 2, None)
    assert "2 attempts" in job.error_message and job.failed_at is not None
    assert OutboxMessage.objects.filter(key=str(job.id)).count() == 2  # enqueue and the first sweep, not the second
    assert [(e["stalled"], e["rejected"]) for e in events(caplog) if e.get("event") == "ledger.sweep"] == [(1, 0), (1, 1)]

    services.job_retry(ledger_id=job.id)  # a new request: the sweep may take it back again
    services.job_start(ledger_id=job.id)
    stale(job.id, minutes=30)
    assert services.job_sweep(timeout_ms=15 * 60 * 1000) == 1
    job.refresh_from_db()
    assert job.status == "PENDING" and job.attempt_count == 3


def test_a_run_id_that_is_not_the_jobs_does_nothing(finance):
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED)
    services.job_start(ledger_id=job.id)
    assert services.job_run(ledger_id=job.id, run_id=str(uuid.uuid4())) is False
    job.refresh_from_db()
    assert job.status == "PROCESSING"


def test_the_sweep_publishes_again_a_job_pending_too_long(caplog):
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED)
    recent = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="PDF", period=CLOSED)
    LedgerJob.objects.filter(pk=job.id).update(queued_at=timezone.now() - datetime.timedelta(minutes=30))

    assert services.job_sweep(timeout_ms=15 * 60 * 1000) == 0

    assert OutboxMessage.objects.filter(key=str(job.id)).count() == 2
    assert OutboxMessage.objects.filter(key=str(recent.id)).count() == 1
    job.refresh_from_db()
    assert job.status == "PENDING" and job.queued_at > timezone.now() - datetime.timedelta(minutes=1)
    assert [e["republished"] for e in events(caplog) if e.get("event") == "ledger.sweep"] == [1]


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_two_sweeps_at_once_take_each_stalled_job_once():
    stalled = [services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period=CLOSED) for _ in range(6)]
    for job in stalled:
        services.job_start(ledger_id=job.id)
    stale(*[job.id for job in stalled], minutes=60)
    barrier, counts = threading.Barrier(2), []

    def sweep():
        barrier.wait()
        counts.append(services.job_sweep(timeout_ms=1000))
        connections["ledger"].close()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sum(counts) == 6
    for job in stalled:
        assert OutboxMessage.objects.filter(key=str(job.id)).count() == 2  # enqueue, and one sweep
    assert set(LedgerJob.objects.filter(pk__in=[job.id for job in stalled]).values_list("status", flat=True)) == {"PENDING"}


def test_another_application_secret_or_a_tampered_object_does_not_open(finance, owner, settings, caplog):
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=5, start=START)
    job = generate()
    secret = settings.APP_ENV_APPLICATION_SECRET
    settings.APP_ENV_APPLICATION_SECRET = "another-secret"

    response = owner.get(f"{BASE}/{job.id}/download")

    assert response.status_code == 500 and response.json()["code"] == "DECRYPT_FAILED"
    assert any(e.get("event") == "decrypt failed" for e in events(caplog))
    settings.APP_ENV_APPLICATION_SECRET = secret
    assert owner.get(f"{BASE}/{job.id}/download").status_code == 200
    sealed = bytearray(storage.read(job.object_key))
    sealed[-40] ^= 1
    storage.upload(job.object_key, io.BytesIO(bytes(sealed)))
    tampered = owner.get(f"{BASE}/{job.id}/download")
    assert tampered.status_code == 500 and tampered.json()["code"] == "DECRYPT_FAILED"
