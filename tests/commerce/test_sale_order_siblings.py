"""Placing checks what taxation, inventory and payment answer names this order and merchant: a
sibling answering for something else (another merchant, reference, line or amount) gets nothing
of the order kept (502 <SERVICE>_ANSWER_INVALID, whatever was held undone), or, for a transaction
or reservations of other content under the order's reference, a fresh reference. The siblings are
the real services behind a gateway that rewrites one answer."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from apps.commerce.models import SaleOrder
from apps.payment.models import PaymentTransaction
from tests.commerce.test_sale_order_money import VAT_EXCLUSIVE, taxed_variant
from tests.commerce.test_sale_orders import ORDERS, create, place, reserved

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


class TamperingGateway:
    """Forwards every request to the live server; the answer of the next `times` requests whose
    method and path end match a planned rewrite goes through it first."""

    def __init__(self, upstream: str):
        self.rewrites: list[list] = []  # [method, path end, function of the JSON body, times left]
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {name: self.headers[name] for name in ("Authorization", "Content-Type") if self.headers.get(name)}
                answer = requests.request(self.command, upstream + self.path, data=body, headers=headers, timeout=30)
                content = answer.content
                for rewrite in gateway.rewrites:
                    method, path_end, function, times = rewrite
                    if times and self.command == method and self.path.split("?")[0].endswith(path_end):
                        rewrite[3] -= 1
                        content = json.dumps(function(answer.json())).encode()
                        break
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def rewrite(self, method: str, path_end: str, function, *, times: int = 100) -> None:
        self.rewrites.append([method, path_end, function, times])


@pytest.fixture
def gateway(shop):
    server = TamperingGateway(shop.base)
    for service in ("inventory", "taxation", "payment"):
        setattr(shop.settings, f"COMMERCE_{service.upper()}_URL", f"{server.url}/v1/api/{service}")
    yield server
    server.server.shutdown()
    server.server.server_close()


def refused_and_nothing_held(shop, order: dict, status: int, code: str) -> None:
    response = place(shop, order)
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert SaleOrder.objects.get(pk=order["id"]).status == "DRAFT"
    assert reserved(shop) == 0
    assert not PaymentTransaction.objects.filter(merchant_id=shop.merchant.id, status="NEW").exists()


def test_a_quote_for_another_merchant_or_other_lines_is_refused(shop, gateway):
    variant = taxed_variant(shop, price=1000, items=VAT_EXCLUSIVE)
    body = {"merchantId": str(shop.merchant.id), "lines": [{"variantId": str(variant.id), "quantity": 1}], "paymentChannel": "SYSTEM"}
    order = shop.client.post(ORDERS, body, format="json").json()
    gateway.rewrite("POST", "/quotes", lambda quote: {**quote, "merchantId": "1"}, times=1)
    refused_and_nothing_held(shop, order, 502, "TAXATION_ANSWER_INVALID")
    gateway.rewrite("POST", "/quotes", lambda quote: {**quote, "lines": [{**quote["lines"][0], "tax": 0}]}, times=1)  # net + tax != gross
    refused_and_nothing_held(shop, order, 502, "TAXATION_ANSWER_INVALID")
    gateway.rewrite("POST", "/quotes", lambda quote: {**quote, "lines": [{**quote["lines"][0], "unitPrice": 1}]}, times=1)
    refused_and_nothing_held(shop, order, 502, "TAXATION_ANSWER_INVALID")
    assert place(shop, order).json()["grossAmount"] == 1200  # the true quote places it


def test_reservations_of_another_merchant_are_refused_and_released(shop, gateway):
    order = create(shop)
    gateway.rewrite("POST", "/internal/reservations", lambda rows: [{**row, "merchantId": "1"} for row in rows], times=1)
    refused_and_nothing_held(shop, order, 502, "INVENTORY_ANSWER_INVALID")


def test_reservations_of_other_quantities_place_afresh(shop, gateway):
    order = create(shop)
    gateway.rewrite("POST", "/internal/reservations", lambda rows: [{**row, "quantity": 1} for row in rows], times=1)
    placed = place(shop, order).json()
    assert (placed["status"], placed["placementReference"]) == ("PLACED", f"{order['id']}-2")
    assert reserved(shop) == 2


def test_a_transaction_of_another_merchant_is_refused_and_the_stock_released(shop, gateway):
    order = create(shop)
    gateway.rewrite("POST", "/transactions", lambda txn: {**txn, "merchantId": "1"}, times=1)
    response = place(shop, order)
    assert (response.status_code, response.json()["code"]) == (502, "PAYMENT_ANSWER_INVALID")
    assert SaleOrder.objects.get(pk=order["id"]).status == "DRAFT" and reserved(shop) == 0


def test_a_transaction_of_other_content_is_cancelled_and_a_fresh_one_opened(shop, gateway):
    order = create(shop)
    gateway.rewrite("POST", "/transactions", lambda txn: {**txn, "amount": 1}, times=1)
    placed = place(shop, order).json()
    assert (placed["status"], placed["placementReference"]) == ("PLACED", f"{order['id']}-2")
    assert PaymentTransaction.objects.get(source_id=order["id"]).status == "CANCELLED"
    assert PaymentTransaction.objects.get(pk=placed["paymentTransactionId"]).amount == 2500
    # Every try answered with other content: 409, nothing more held.
    again = create(shop)
    gateway.rewrite("POST", "/transactions", lambda txn: {**txn, "lines": []})
    response = place(shop, again)
    assert (response.status_code, response.json()["code"]) == (409, "PLACEMENT_CONFLICT"), response.json()
    assert SaleOrder.objects.get(pk=again["id"]).status == "DRAFT" and reserved(shop) == 2  # the first order's units only
    assert [t.status for t in PaymentTransaction.objects.filter(source_id__startswith=again["id"])] == ["CANCELLED", "CANCELLED"]
