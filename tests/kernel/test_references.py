"""merchant_platform.references: a reference to another service's record is checked with its owner,
over real HTTP (a small server standing in for the owner's single-record route)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from merchant_platform.errors import InvalidInput, ServiceUnavailable
from merchant_platform.references import check_owned, record_merchant
from tests.support.ports import free_port

ANSWERS = {
    "/accounts/1": (200, b'{"id": "1", "merchantId": "7"}'),
    "/accounts/2": (404, b'{"code": "NOT_FOUND"}'),
    "/accounts/3": (500, b'{"code": "ERROR"}'),
    "/accounts/4": (200, b"<html>a login page</html>"),
    "/accounts/5": (200, b'["not", "a", "record"]'),
}


class Owner(BaseHTTPRequestHandler):
    def do_GET(self):
        status, body = ANSWERS.get(self.path, (404, b"{}"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        type(self).authorizations.append(self.headers.get("Authorization", ""))

    def log_message(self, *args):
        """No access log."""


@pytest.fixture
def owner():
    Owner.authorizations = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Owner)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_the_owner_says_whose_the_record_is(owner):
    assert record_merchant(f"{owner}/accounts/1") == "7"
    assert record_merchant(f"{owner}/accounts/2") is None
    assert all(value.startswith("Basic ") for value in Owner.authorizations)  # a service account's call


def test_another_merchants_record_or_none_is_a_400_naming_the_field(owner):
    check_owned(field="financeAccountId", url=f"{owner}/accounts/1", merchant_id=7, what="finance account")
    for record in ("1", "2"):
        with pytest.raises(InvalidInput) as refused:
            check_owned(field="financeAccountId", url=f"{owner}/accounts/{record}", merchant_id=8, what="finance account")
        assert "financeAccountId" in refused.value.detail


@pytest.mark.parametrize("record", ["3", "4", "5"])
def test_an_owner_that_answers_no_record_is_a_503(owner, record):
    with pytest.raises(ServiceUnavailable):
        check_owned(field="accountId", url=f"{owner}/accounts/{record}", merchant_id=7, what="finance account")


def test_an_owner_that_cannot_be_reached_is_a_503():
    with pytest.raises(ServiceUnavailable):
        record_merchant(f"http://127.0.0.1:{free_port()}/accounts/1")
