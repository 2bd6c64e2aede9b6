"""Fixtures of the ledger tests: a real HTTP server speaking finance's general-ledger export (the
contract in docs/services/ledger.md, as finance's GeneralLedgerPageSerializer answers it, with HTTP
Basic and keyset pages), books to serve from it, and operators with real tokens and policies."""

from __future__ import annotations

import base64
import datetime
import io
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from django.conf import settings as django_settings
from django.test import override_settings

from apps.ledger import storage

EXPORT = "/v1/api/finance/internal/general-ledger"
ACCOUNT_ROUTE = re.compile(r"/v1/api/finance/accounts/(\d+)")
ACCOUNTS = (
    ("1000", "Cash", "ASSET"),
    ("1200", "Receivables", "ASSET"),
    ("4000", "Sales", "REVENUE"),
    ("5000", "Cost of goods sold", "EXPENSE"),
)


def account_id(code: str) -> str:
    return str(900_000 + int(code))


def make_books(merchant_id: int, *, vouchers: int, start: datetime.date, days: int = 28, currency: str = "EUR") -> list[dict]:
    """Balanced two-line vouchers spread over `days` days from `start`, in (date, line id) order."""
    entries = []
    for number in range(vouchers):
        day = start + datetime.timedelta(days=number % days)
        debit_code, credit_code = (("1000", "4000"), ("5000", "1200"))[number % 2]
        amount = 100 + (number * 37) % 9000
        for line, (code, debit, credit) in enumerate(((debit_code, amount, 0), (credit_code, 0, amount)), start=1):
            name, account_type = next((n, t) for c, n, t in ACCOUNTS if c == code)
            kind = "SALE" if number % 2 == 0 else "COGS"
            entries.append(
                {
                    "lineId": str(10_000_000 + number * 10 + line),
                    "date": day.isoformat(),
                    "voucherId": str(5_000_000 + number),
                    "voucherNumber": f"V-{day.year}-{number + 1:06d}",
                    "kind": kind,
                    "reason": "",
                    "voucherStatus": "issued",
                    "memo": f"voucher {number}",
                    "reversesId": None,
                    "lineNumber": line,
                    "accountId": account_id(code),
                    "accountCode": code,
                    "accountName": name,
                    "accountType": account_type,
                    "currency": currency,
                    "debit": debit,
                    "credit": credit,
                }
            )
    entries.sort(key=lambda entry: (entry["date"], int(entry["lineId"])))
    return entries


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        """No access log on stderr."""


@dataclass
class FakeFinance:
    """Finance's export over real HTTP: books per merchant, `tamper` to break the contract,
    `on_page` called (in the server's thread) with the number of the page being answered."""

    books: dict[int, list[dict]] = field(default_factory=dict)
    accounts: dict[int, int] = field(default_factory=dict)  # account id -> merchant id, besides the books' accounts
    requests: list[dict] = field(default_factory=list)
    tamper: object = None
    url: str = ""
    expected_password: str | None = None  # None: the password of ledger's service account
    delay_seconds: float = 0  # how long each page takes
    on_page: object = None

    def app(self, environ, start_response):
        def answer(status: str, body: dict):
            data = json.dumps(body).encode()
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
            return [data]

        account = ACCOUNT_ROUTE.fullmatch(environ["PATH_INFO"])
        if environ["PATH_INFO"] != EXPORT and account is None:
            return answer("404 Not Found", {"code": "NOT_FOUND"})
        password = self.expected_password or django_settings.SERVICE_BASIC_AUTH_ACCOUNTS["ledger"]
        expected = "Basic " + base64.b64encode(f"ledger:{password}".encode()).decode()  # ledger's own account
        if environ.get("HTTP_AUTHORIZATION") != expected:
            return answer("401 Unauthorized", {"code": "UNAUTHENTICATED"})
        if account is not None:  # an account statement's account, checked when the job is made
            merchant = self.merchant_of(int(account[1]))
            if merchant is None:
                return answer("404 Not Found", {"code": "NOT_FOUND"})
            return answer("200 OK", {"id": account[1], "merchantId": str(merchant)})
        query = {key: values[0] for key, values in parse_qs(environ["QUERY_STRING"]).items()}
        time.sleep(self.delay_seconds)
        self.requests.append({**query, "requestId": environ.get("HTTP_X_REQUEST_ID")})
        merchant, limit = int(query["merchantId"]), int(query.get("limit", 500))
        lines = [e for e in self.books.get(merchant, []) if query["dateFrom"] <= e["date"] <= query["dateTo"]]
        start = 0
        if "cursor" in query:
            day, line_id = query["cursor"].split("_")
            start = next((i for i, e in enumerate(lines) if (e["date"], int(e["lineId"])) > (day, int(line_id))), len(lines))
        page = lines[start : start + limit]
        more = start + limit < len(lines)
        body = {
            "merchantId": str(merchant),
            "dateFrom": query["dateFrom"],
            "dateTo": query["dateTo"],
            "entries": page,
            "nextCursor": f"{page[-1]['date']}_{page[-1]['lineId']}" if more else None,
        }
        if self.tamper is not None:
            body = self.tamper(body)
        if self.on_page is not None:
            self.on_page(len(self.requests))
        return answer("200 OK", body)

    def merchant_of(self, account: int) -> int | None:
        if account in self.accounts:
            return self.accounts[account]
        return next((m for m, entries in self.books.items() if any(e["accountId"] == str(account) for e in entries)), None)


@pytest.fixture
def finance(settings, writable_bucket):
    """Finance's export on a port of its own, and the tests' bucket (S3 clients are kept per
    endpoint, so a test that changes S3_ENDPOINT_URL gets a client of the new one)."""
    settings.LEDGER_BUCKET = writable_bucket
    fake = FakeFinance()
    server = make_server("127.0.0.1", 0, fake.app, server_class=WSGIServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_port}/v1/api/finance"
    settings.LEDGER_FINANCE_URL = fake.url
    yield fake
    server.shutdown()
    server.server_close()


TEST_BUCKET = os.environ.get("LEDGER_TEST_BUCKET", "ledger-documents-test")


@pytest.fixture(scope="session")
def writable_bucket():
    """The tests' bucket, checked once. A SeaweedFS started with the default -volume.max=8 has no
    volume left for a new bucket once two collections exist (PutObject answers InternalError): say
    so in one line rather than fail every test with a storage error. LEDGER_TEST_BUCKET may name a
    bucket that has volumes."""
    from django.conf import settings

    with override_settings(LEDGER_BUCKET=TEST_BUCKET):
        try:
            storage.upload("probe", io.BytesIO(b"probe"))
            storage.delete("probe")
        except storage.StorageFailed:
            pytest.fail(
                f"the S3 server at {settings.S3_ENDPOINT_URL} does not take objects in bucket {TEST_BUCKET!r} (SeaweedFS "
                "without free volumes? weed server -volume.max): set LEDGER_TEST_BUCKET to a writable bucket",
                pytrace=False,
            )
    return TEST_BUCKET


def downloaded(response) -> bytes:
    """The body of a download (a streaming response), read to its end."""
    assert response.status_code == 200, response
    return b"".join(response.streaming_content)
