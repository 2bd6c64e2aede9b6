"""Finance over HTTP: accounts (list, count, create, rename, statement), vouchers (post with an
Idempotency-Key, read, void), lines, the trial balance and the internal general-ledger export; bad
input as 4xx problem bodies; and tenant isolation on every route (404 across tenants)."""

from __future__ import annotations

import datetime
import itertools
import json
import tracemalloc
from datetime import timedelta

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from apps.finance import services
from apps.finance.models import Account, FinanceTransaction, Voucher
from merchant_platform import idempotency
from tests.finance.conftest import books, post
from tests.support.auth import make_caller, service_headers

pytestmark = pytest.mark.django_db(databases="__all__")
API = "/v1/api/finance"


@pytest.fixture
def shop(seeded):
    """A merchant's books and an OWNER member of that merchant."""
    chart = books()
    owner = make_caller(roles=["OWNER"], merchants=[chart["CASH"].merchant_id])
    return chart, owner.client()


def voucher_body(chart, amount=1000, **extra):
    return {
        "merchantId": str(chart["CASH"].merchant_id),
        "kind": "SALE",
        "memo": "Counter sale",
        "lines": [{"accountId": str(chart["CASH"].id), "debit": amount}, {"accountId": str(chart["SALES"].id), "credit": amount}],
        **extra,
    }


def test_accounts_list_count_create_rename(shop):
    chart, client = shop
    merchant = str(chart["CASH"].merchant_id)
    listed = client.get(f"{API}/accounts", {"merchantId": merchant, "ordering": "code"})
    assert listed.status_code == 200
    assert [a["code"] for a in listed.json()["results"]][:2] == ["1000", "1010"]
    assert listed.json()["results"][0]["postingSequence"] == 0
    assert client.get(f"{API}/accounts/count", {"systemRole": "COGS"}).json() == {"count": 1}
    created = client.post(
        f"{API}/accounts", {"merchantId": merchant, "code": "1020", "name": "Till 2", "type": "ASSET", "currency": "EUR"}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert (created.json()["normalSide"], created.json()["balance"]) == ("DEBIT", 0)
    again = client.post(
        f"{API}/accounts", {"merchantId": merchant, "code": "1020", "name": "x", "type": "ASSET", "currency": "EUR"}, format="json"
    )
    assert (again.status_code, again.json()["code"]) == (409, "ACCOUNT_CODE_TAKEN")
    renamed = client.patch(f"{API}/accounts/{created.json()['id']}", {"name": "Till two"}, format="json")
    assert renamed.json()["name"] == "Till two"
    refused = client.patch(f"{API}/accounts/{created.json()['id']}", {"balance": 5}, format="json")
    assert refused.status_code == 400


def test_post_read_and_void_a_voucher(shop):
    chart, client = shop
    created = client.post(f"{API}/vouchers", voucher_body(chart), format="json")
    assert created.status_code == 201, created.json()
    voucher = created.json()
    assert (voucher["status"], voucher["voidable"], voucher["voucherId"]) == ("issued", True, voucher["id"])
    assert [(line["lineNumber"], line["debit"], line["credit"]) for line in voucher["lines"]] == [(1, 1000, 0), (2, 0, 1000)]
    read = client.get(f"{API}/vouchers/{voucher['id']}")
    assert read.json()["voucherNumber"] == voucher["voucherNumber"]
    voided = client.post(f"{API}/vouchers/{voucher['id']}/actions/void", {"memo": "Wrong till"}, format="json")
    assert voided.status_code == 200, voided.json()
    assert voided.json()["status"] == "voided" and voided.json()["reversalId"]
    reversal = client.get(f"{API}/vouchers/{voided.json()['reversalId']}").json()
    assert (reversal["kind"], reversal["reversesId"], reversal["memo"]) == ("REVERSAL", voucher["id"], "Wrong till")
    twice = client.post(f"{API}/vouchers/{voucher['id']}/actions/void", {}, format="json")
    assert (twice.status_code, twice.json()["code"]) == (409, "VOUCHER_ALREADY_VOIDED")
    lines = client.get(f"{API}/transactions", {"accountId": str(chart["CASH"].id), "ordering": "postingSequence"}).json()["results"]
    assert [(line["postingSequence"], line["balanceAfter"]) for line in lines] == [(1, 1000), (2, 0)]


def test_cogs_voucher_is_not_voidable_over_http(shop):
    from apps.finance import services

    chart, client = shop
    cogs = services.cogs_post(merchant_id=chart["CASH"].merchant_id, order_id="o-1", currency="EUR", amount=10)
    response = client.post(f"{API}/vouchers/{cogs.id}/actions/void", {}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "VOUCHER_NOT_VOIDABLE")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"lines": "x"}, "lines"),
        ({"kind": "COGS"}, "kind"),
        ({"kind": "REVERSAL"}, "kind"),
        ({"kind": "ADJUSTMENT"}, "reason"),
        ({"reason": "correction"}, "reason"),
        ({"lines": [{"accountId": "1", "debit": 5}, {"accountId": "2", "credit": 5}]}, "lines.0.accountId"),
        ({"lines": [{"accountId": "1", "debit": "5"}, {"accountId": "2", "credit": 5}]}, "lines.0.debit"),
        ({"lines": [{"accountId": "1", "debit": -5}, {"accountId": "2", "credit": -5}]}, "lines.0.debit"),
        ({"lines": [{"accountId": "1", "debit": 5.5}, {"accountId": "2", "credit": 5.5}]}, "lines.0.debit"),
        ({"merchantId": "abc"}, "merchantId"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_vouchers_are_400_naming_the_field(shop, change, field):
    chart, client = shop
    response = client.post(f"{API}/vouchers", {**voucher_body(chart), **change}, format="json")
    assert response.status_code == 400, response.json()
    assert response["Content-Type"] == "application/problem+json"
    assert any(error["field"].startswith(field) for error in response.json()["errors"]), response.json()["errors"]
    assert not Voucher.objects.filter(merchant_id=chart["CASH"].merchant_id).exists()


def test_unbalanced_voucher_names_the_currency(shop):
    chart, client = shop
    body = voucher_body(chart)
    body["lines"][1]["credit"] = 999
    response = client.post(f"{API}/vouchers", body, format="json")
    assert response.status_code == 400
    assert "EUR: debits 1000, credits 999" in response.json()["errors"][0]["message"]


def test_idempotency_key_replays_refuses_another_body_and_a_running_first(shop):
    from apps.finance.models import IdempotencyKey

    chart, client = shop
    body = voucher_body(chart)
    first = client.post(f"{API}/vouchers", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    replay = client.post(f"{API}/vouchers", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == replay.status_code == 201
    assert replay.json() == first.json() and replay["Idempotent-Replayed"] == "true"
    assert Voucher.objects.filter(merchant_id=chart["CASH"].merchant_id).count() == 1
    other = client.post(f"{API}/vouchers", voucher_body(chart, amount=5), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert (other.status_code, other.json()["code"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    # A first request still running: its key is claimed and no voucher is recorded yet.
    running_since = timezone.now()
    IdempotencyKey.objects.create(
        caller=f"user:{first.wsgi_request.user.id}",
        operation="vouchers.create",
        key="k-2",
        request_hash=_hash(body),
        started_at=running_since,
    )
    running = client.post(f"{API}/vouchers", body, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert (running.status_code, running.json()["code"]) == (409, "IDEMPOTENCY_KEY_IN_PROGRESS")
    # A first request whose process died (silent past the stale time) is taken over by the retry.
    IdempotencyKey.objects.filter(key="k-2").update(started_at=running_since - timedelta(seconds=idempotency.STALE_SECONDS + 1))
    taken_over = client.post(f"{API}/vouchers", body, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert taken_over.status_code == 201 and "Idempotent-Replayed" not in taken_over
    assert IdempotencyKey.objects.get(key="k-2").result_id == int(taken_over.json()["id"])
    # A failed first request leaves the key free for a corrected retry with the same body.
    bad = voucher_body(chart)
    bad["lines"][1]["credit"] = 1
    assert client.post(f"{API}/vouchers", bad, format="json", HTTP_IDEMPOTENCY_KEY="k-3").status_code == 400
    assert client.post(f"{API}/vouchers", bad, format="json", HTTP_IDEMPOTENCY_KEY="k-3").status_code == 400
    assert client.post(f"{API}/vouchers", body, format="json", HTTP_IDEMPOTENCY_KEY="bad key").status_code == 400


def _hash(body) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_trial_balance_and_statement(shop):
    chart, client = shop
    today = timezone.localdate()
    yesterday = today - datetime.timedelta(days=1)
    post(chart["CASH"], chart["SALES"], 500, date=yesterday)
    post(chart["CASH"], chart["SALES"], 300, date=today)
    post(chart["COGS"], chart["CASH"], 100, date=today, kind="PAYMENT")
    merchant = str(chart["CASH"].merchant_id)
    trial = client.get(f"{API}/reports/trial-balance", {"merchantId": merchant}).json()
    rows = {row["account"]["systemRole"]: row for row in trial["accounts"]}
    assert (rows["CASH"]["debit"], rows["CASH"]["credit"], rows["CASH"]["balance"]) == (800, 100, 700)
    assert rows["SALES"]["balance"] == 800
    assert trial["totals"] == [{"currency": "EUR", "debit": 900, "credit": 900}]
    earlier = client.get(f"{API}/reports/trial-balance", {"merchantId": merchant, "asOf": yesterday.isoformat()}).json()
    assert {row["account"]["systemRole"]: row["balance"] for row in earlier["accounts"]}["CASH"] == 500
    body = _statement(
        client.get(f"{API}/accounts/{chart['CASH'].id}/statement", {"dateFrom": today.isoformat(), "dateTo": today.isoformat()})
    )
    assert (body["openingBalance"], [e["runningBalance"] for e in body["entries"]], body["closingBalance"]) == (500, [800, 700], 700)
    bad = client.get(f"{API}/accounts/{chart['CASH'].id}/statement", {"dateFrom": today.isoformat(), "dateTo": yesterday.isoformat()})
    assert bad.status_code == 400


def test_general_ledger_export_pages_with_a_cursor_and_needs_service_credentials(shop):
    chart, client = shop
    for amount in (1, 2, 3):
        post(chart["CASH"], chart["SALES"], amount)
    service = APIClient()
    service.credentials(**service_headers())
    today = timezone.localdate().isoformat()
    query = {"merchantId": str(chart["CASH"].merchant_id), "dateFrom": today, "dateTo": today, "limit": 4}
    first = service.get(f"{API}/internal/general-ledger", query)
    assert first.status_code == 200, first.json()
    second = service.get(f"{API}/internal/general-ledger", {**query, "cursor": first.json()["nextCursor"]}).json()
    entries = first.json()["entries"] + second["entries"]
    assert len(entries) == 6 and second["nextCursor"] is None
    assert len({e["lineId"] for e in entries}) == 6
    assert {e["accountCode"] for e in entries} == {"1000", "4000"} and entries[0]["voucherNumber"]
    assert sum(e["debit"] for e in entries) == sum(e["credit"] for e in entries) == 6
    assert client.get(f"{API}/internal/general-ledger", query).status_code in (401, 403)
    assert service.get(f"{API}/internal/general-ledger", {**query, "cursor": "nope"}).status_code == 400


def test_tenant_isolation_every_route_is_404_across_tenants(seeded):
    mine, theirs = books(), books()
    voucher = post(theirs["CASH"], theirs["SALES"], 100)
    line = voucher.lines.first()
    client = make_caller(roles=["OWNER"], merchants=[mine["CASH"].merchant_id]).client()
    foreign = theirs["CASH"]
    for method, url, body in [
        ("get", f"{API}/accounts/{foreign.id}", None),
        ("patch", f"{API}/accounts/{foreign.id}", {"name": "mine now"}),
        ("get", f"{API}/accounts/{foreign.id}/statement?dateFrom=2020-01-01&dateTo=2030-01-01", None),
        ("get", f"{API}/vouchers/{voucher.id}", None),
        ("post", f"{API}/vouchers/{voucher.id}/actions/void", {}),
        ("get", f"{API}/transactions/{line.id}", None),
        ("get", f"{API}/reports/trial-balance?merchantId={foreign.merchant_id}", None),
    ]:
        response = getattr(client, method)(url, body, format="json") if body is not None else client.get(url)
        assert response.status_code == 404, (url, response.status_code)
    assert Account.objects.get(pk=foreign.pk).name == "Cash"
    assert Voucher.objects.get(pk=voucher.pk).status == "issued"
    for url in ("accounts", "vouchers", "transactions"):
        ids = {row["merchantId"] for row in client.get(f"{API}/{url}").json()["results"]}
        assert ids <= {str(mine["CASH"].merchant_id)}, url
    assert client.get(f"{API}/accounts/count", {"merchantId": str(foreign.merchant_id)}).json() == {"count": 0}
    # Posting into another merchant's books, or with its accounts, is refused and posts nothing.
    refused = client.post(f"{API}/vouchers", voucher_body(theirs), format="json")
    assert refused.status_code == 403
    mixed = voucher_body(mine)
    mixed["lines"][1]["accountId"] = str(theirs["SALES"].id)
    assert client.post(f"{API}/vouchers", mixed, format="json").status_code == 400
    assert Voucher.objects.filter(merchant_id=theirs["CASH"].merchant_id).count() == 1


def test_a_user_without_membership_sees_nothing(seeded):
    chart = books()
    post(chart["CASH"], chart["SALES"], 100)
    outsider = make_caller(permissions=["finance.Account.read", "finance.Voucher.read"]).client()
    assert outsider.get(f"{API}/accounts").json()["results"] == []
    assert outsider.get(f"{API}/accounts/count").json() == {"count": 0}
    assert outsider.get(f"{API}/accounts/{chart['CASH'].id}").status_code == 404


def _statement(response) -> dict:
    assert response.status_code == 200 and response.streaming
    return json.loads(b"".join(response.streaming_content))


def _stream(client, url, query) -> tuple[int, int, list]:
    """Read a statement's streamed body without keeping it: its size, the Python heap's peak while
    it streamed, and the queries it ran; checks that its lines come from a cursor held open in the
    database (a server-side cursor) while it streams."""
    response = client.get(url, query)
    assert response.status_code == 200 and response.streaming
    chunks = iter(response.streaming_content)
    tracemalloc.start()
    try:
        with CaptureQueriesContext(connections["finance"]) as queries:
            size = len(next(chunks)) + len(next(chunks))  # the head, then the first chunk of entries
            with connections["finance"].cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_cursors")
                assert cursor.fetchone()[0] == 1
            size += sum(len(chunk) for chunk in chunks)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return size, peak, [q["sql"] for q in queries if "pg_cursors" not in q["sql"]]


def test_a_long_statement_streams_in_memory_that_does_not_grow_with_the_period(shop):
    """1,000 then 10,000 lines in the period: the response streams from a server-side cursor read
    STATEMENT_CHUNK rows at a time, so the heap's peak stays the same for ten times the lines, the
    lines cost one query whatever their number, and the body is the statement: opening balance,
    every line in date then posting order with its running balance, closing balance."""
    chart, client = shop
    cash, sales, bank = chart["CASH"], chart["SALES"], chart["BANK"]
    today = timezone.localdate()
    days = [today - datetime.timedelta(days=2), today - datetime.timedelta(days=1), today]
    post(cash, sales, 7_000, date=today - datetime.timedelta(days=3))  # before the period: the opening balance
    postings = [
        {
            "merchant_id": cash.merchant_id,
            "kind": "PAYMENT",
            "date": days[0] if n % 10 == 0 else days[n % 2 + 1],  # posted out of date order: the statement reorders them
            "lines": [{"account_id": cash.id, "debit": 1 + n % 7} for _ in range(10)]
            + [{"account_id": sales.id, "credit": 1 + n % 7} for _ in range(5)]
            + [{"account_id": bank.id, "credit": 1 + n % 7} for _ in range(5)],
        }
        for n in range(1_000)
    ]
    services.vouchers_post_many(postings=postings)
    url = f"{API}/accounts/{cash.id}/statement"
    short = {"dateFrom": days[0].isoformat(), "dateTo": days[0].isoformat()}
    query = {"dateFrom": days[0].isoformat(), "dateTo": days[-1].isoformat()}

    short_size, short_peak, _ = _stream(client, url, short)
    size, peak, queries = _stream(client, url, query)
    assert size > 9 * short_size and size > 3_000_000  # 10,000 entries of about 400 bytes
    assert peak < 1.5 * short_peak, f"peak {peak} bytes for 10,000 lines, {short_peak} for 1,000"
    assert len(queries) == 1 and "ORDER BY" in queries[0]

    body = _statement(client.get(url, query))
    lines = FinanceTransaction.objects.filter(account_id=cash.id, date__gte=days[0]).order_by("date", "posting_sequence")
    expected = list(itertools.accumulate((line.debit for line in lines), initial=7_000))
    assert body["openingBalance"] == 7_000 and len(body["entries"]) == 10_000
    assert [e["line"]["id"] for e in body["entries"]] == [str(line.id) for line in lines]
    assert [e["runningBalance"] for e in body["entries"]] == expected[1:]
    assert body["closingBalance"] == expected[-1] == Account.objects.get(pk=cash.id).balance
    entry, voucher = body["entries"][0], Voucher.objects.get(pk=lines[0].voucher_id)
    assert (entry["voucherNumber"], entry["kind"], entry["memo"]) == (voucher.voucher_number, "PAYMENT", voucher.memo)
    assert entry["line"]["date"] == days[0].isoformat() and entry["line"]["balanceAfter"] == lines[0].balance_after
    assert body["account"]["id"] == str(cash.id) and body["dateFrom"] == query["dateFrom"]


def test_an_empty_statement_streams_its_opening_as_closing_balance(shop):
    chart, client = shop
    post(chart["CASH"], chart["SALES"], 250, date=timezone.localdate() - datetime.timedelta(days=5))
    day = timezone.localdate().isoformat()
    body = _statement(client.get(f"{API}/accounts/{chart['CASH'].id}/statement", {"dateFrom": day, "dateTo": day}))
    assert (body["openingBalance"], body["entries"], body["closingBalance"]) == (250, [], 250)
