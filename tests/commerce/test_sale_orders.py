"""Sale orders (issue 20): priced from the catalog, placed by a saga over the real taxation,
inventory and payment APIs (the live server, HTTP Basic), each failure point undone, paid through a
signed payment webhook, cancelled, fulfilled and expired."""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime

import pytest
import requests
from django.db import OperationalError
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from apps.commerce.models import PaymentSubscription, SaleOrder, SaleOrderLine
from apps.commerce.sales import services as sales
from apps.commerce.sales.services import placing
from apps.inventory.models import Reservation, Stock
from apps.payment import services as payment
from apps.payment.models import PaymentTransaction, WebhookDelivery
from merchant_platform import crypto
from merchant_platform.errors import Conflict
from tests.commerce.conftest import new_merchant, new_product, new_variant
from tests.payment.conftest import ipn_fields, signed
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
ORDERS = "/v1/api/commerce/sale-orders"
DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port


def create(shop, quantity: int = 2, **fields) -> dict:
    body = {
        "merchantId": str(shop.merchant.id),
        "lines": [{"variantId": str(shop.variant.id), "quantity": quantity}],
        "paymentChannel": "SYSTEM",
    }
    response = shop.client.post(ORDERS, {**body, **fields}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def place(shop, order: dict, **headers):
    return shop.client.post(f"{ORDERS}/{order['id']}/actions/place", format="json", **headers)


def reserved(shop) -> int:
    stock = Stock.objects.filter(item_id=shop.item.id).first()
    return stock.reserved if stock else 0


def pay(shop, order: dict, *, ipn_path: str = "/api/pay/system/ipn") -> None:
    """The customer pays: a signed IPN at payment's endpoint (SYSTEM's unless `ipn_path` names a
    provider's), then payment's webhook deliveries are sent (what its Celery worker does) to
    commerce's endpoint on the live server."""
    fields = signed(ipn_fields(order["payment"]["attempts"][0]), shop.secret)
    answer = requests.post(f"{shop.base}{ipn_path}", json=fields, timeout=10).json()
    assert answer["RspCode"] == "00", answer
    deliver(shop)


def deliver(shop) -> None:
    for delivery_id in WebhookDelivery.objects.filter(merchant_id=shop.merchant.id, status="PENDING").values_list("id", flat=True):
        payment.webhook_deliver(delivery_id=delivery_id)


def order_of(shop, order: dict) -> dict:
    return shop.client.get(f"{ORDERS}/{order['id']}").json()


def test_an_order_is_priced_from_the_catalog_and_placed_once(shop):
    order = create(shop, quantity=2, customerName="Ada", customerEmail="ada@example.com")
    assert (order["status"], order["netAmount"], order["taxAmount"], order["currency"]) == ("DRAFT", 2500, None, "EUR")
    assert order["lines"][0] | {"lineId": "1"} == order["lines"][0] and order["lines"][0]["unitPriceAmount"] == 1250
    # The catalog's later price change does not touch the order.
    shop.variant.price_amount = 9999
    shop.variant.save()
    placed = place(shop, order, HTTP_IDEMPOTENCY_KEY="place-1")
    assert placed.status_code == 200, placed.json()
    body = placed.json()
    assert (body["status"], body["grossAmount"], body["taxAmount"], body["placementReference"]) == ("PLACED", 2500, 0, order["id"])
    assert reserved(shop) == 2
    reservations = Reservation.objects.filter(order_id=order["id"])
    assert [(r.line_id, r.quantity, r.status) for r in reservations] == [("1", 2, "ACTIVE")]
    txn = PaymentTransaction.objects.get(merchant_id=shop.merchant.id, source_id=order["id"])
    assert (txn.amount, txn.currency, [line["variantId"] for line in txn.lines]) == (2500, "EUR", [str(shop.variant.id)])
    assert body["paymentTransactionId"] == str(txn.id) and body["payment"]["attempts"][0]["channel"] == "SYSTEM"
    # Placing again (same key: a replay; no key: the order as it is) opens nothing new.
    replay = place(shop, order, HTTP_IDEMPOTENCY_KEY="place-1")
    assert replay.status_code == 200 and replay["Idempotent-Replayed"] == "true"
    assert place(shop, order).json()["status"] == "PLACED"
    assert PaymentTransaction.objects.filter(merchant_id=shop.merchant.id).count() == 1 and reserved(shop) == 2
    assert PaymentSubscription.objects.filter(merchant_id=shop.merchant.id).count() == 1


def test_paid_by_a_signed_webhook_once_then_fulfilled(shop):
    order = place(shop, create(shop, quantity=3)).json()
    pay(shop, order)
    paid = order_of(shop, order)
    assert paid["status"] == "PAID" and paid["paidAt"] is not None
    # A redelivery (the same webhook-id) changes nothing.
    delivery = WebhookDelivery.objects.filter(merchant_id=shop.merchant.id, event_type="transaction.settled").get()
    payment.webhook_redeliver(delivery_id=delivery.id)
    deliver(shop)
    assert sales_receipts(delivery.message_id) == 1
    fulfilled = shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json")
    assert fulfilled.json()["status"] == "FULFILLED"
    again = shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json")
    assert (again.status_code, again.json()["code"]) == (409, "ILLEGAL_TRANSITION")
    summary = shop.client.get(f"/v1/api/commerce/merchants/{shop.merchant.id}/summary").json()
    assert summary["orders"]["FULFILLED"] == 1 and summary["revenueThisMonth"] == {"EUR": 3750}


def sales_receipts(message_id: str) -> int:
    from apps.commerce.models import PaymentWebhookReceipt

    return PaymentWebhookReceipt.objects.filter(message_id=message_id).count()


def test_webhooks_must_verify(shop):
    order = place(shop, create(shop)).json()
    url = f"{shop.base}/v1/api/commerce/payment-webhooks/{shop.merchant.id}"
    sealed = PaymentSubscription.objects.get(merchant_id=shop.merchant.id).sealed_secret
    secret = crypto.decrypt(sealed, purpose=sales.SECRET_PURPOSE, associated_data=str(shop.merchant.id).encode())
    txn = {key: order["payment"][key] for key in ("id", "merchantId", "sourceId", "amount", "currency")}
    body = json.dumps({"event": "transaction.settled", "transaction": {**txn, "status": "SETTLED"}})
    now = int(time.time())
    good = Webhook(secret).sign("msg_1", datetime.fromtimestamp(now, tz=UTC), body)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now), "content-type": "application/json"}
    assert requests.post(url, data=body + " ", headers={**headers, "webhook-signature": good}, timeout=10).status_code == 401
    stale = str(now - 3600)
    assert (
        requests.post(url, data=body, headers={**headers, "webhook-timestamp": stale, "webhook-signature": good}, timeout=10).status_code
        == 401
    )
    forged = Webhook("whsec_" + "A" * 44).sign("msg_1", datetime.fromtimestamp(now, tz=UTC), body)
    assert requests.post(url, data=body, headers={**headers, "webhook-signature": forged}, timeout=10).status_code == 401
    assert requests.post(url, data=body, headers=headers, timeout=10).status_code == 401  # no signature
    other = f"{shop.base}/v1/api/commerce/payment-webhooks/{shop.merchant.id + 1}"
    assert requests.post(other, data=body, headers={**headers, "webhook-signature": good}, timeout=10).status_code == 404
    assert order_of(shop, order)["status"] == "PLACED"
    ok = requests.post(url, data=body, headers={**headers, "webhook-signature": good}, timeout=10)
    assert ok.status_code == 200 and ok.json() == {"outcome": "paid"}
    assert requests.post(url, data=body, headers={**headers, "webhook-signature": good}, timeout=10).json() == {"outcome": "duplicate"}


def test_a_verified_webhook_naming_no_order_is_recorded_once_and_not_applied():
    """Found by tests/faults/test_wrong_secret.py: this answered 500 (a log keyword clashing with structlog's `event`)."""
    merchant = new_merchant()
    payload = {"event": "transaction.settled", "transaction": {"id": "1", "sourceId": "no-such-order"}}
    assert sales.webhook_apply(merchant_id=merchant.id, message_id="msg_no_order", payload=payload) == "unmatched"
    assert sales.webhook_apply(merchant_id=merchant.id, message_id="msg_no_order", payload=payload) == "duplicate"
    assert sales_receipts("msg_no_order") == 1


def test_not_enough_stock_is_409_and_holds_nothing(shop):
    order = create(shop, quantity=11)
    response = place(shop, order)
    assert (response.status_code, response.json()["code"]) == (409, "INSUFFICIENT_STOCK")
    assert order_of(shop, order)["status"] == "DRAFT" and reserved(shop) == 0
    assert not PaymentTransaction.objects.filter(merchant_id=shop.merchant.id).exists()


def test_taxation_down_is_503_and_a_product_without_tax_set_is_409(shop):
    shop.product.tax_group_id = 42
    shop.product.save()
    SaleOrderLine.objects.update(tax_group_id=42)
    order = create(shop)
    shop.settings.COMMERCE_TAXATION_URL = DEAD
    response = place(shop, order)
    assert (response.status_code, response.json()["code"]) == (503, "TAXATION_UNAVAILABLE")
    shop.settings.COMMERCE_TAXATION_URL = f"{shop.base}/v1/api/taxation"
    refused = place(shop, order)
    assert (refused.status_code, refused.json()["code"]) == (409, "TAX_NOT_AVAILABLE")
    assert order_of(shop, order)["status"] == "DRAFT" and reserved(shop) == 0
    assert not PaymentTransaction.objects.filter(merchant_id=shop.merchant.id).exists()


def test_a_taxed_line_is_quoted_and_its_tax_added_to_the_total(shop):
    from decimal import Decimal

    from apps.taxation import services as taxation

    group = taxation.tax_group_create(merchant_id=shop.merchant.id, name="VAT", items=[{"name": "VAT", "rate": Decimal(19)}])
    taxation.tax_set_provision(product_id=shop.product.id, tax_group_id=group.id, merchant_id=shop.merchant.id)
    shop.product.tax_group_id = group.id
    shop.product.save()
    placed = place(shop, create(shop, quantity=2))
    assert placed.status_code == 200, placed.json()
    body = placed.json()
    assert (body["netAmount"], body["taxAmount"], body["grossAmount"]) == (2500, 475, 2975)
    assert (body["lines"][0]["taxAmount"], body["lines"][0]["grossAmount"]) == (475, 2975)
    assert PaymentTransaction.objects.get(source_id=body["id"]).amount == 2975


def test_inventory_down_is_503(shop):
    order = create(shop)
    shop.settings.COMMERCE_INVENTORY_URL = DEAD
    response = place(shop, order)
    assert (response.status_code, response.json()["code"]) == (503, "INVENTORY_UNAVAILABLE")
    assert order_of(shop, order)["status"] == "DRAFT" and reserved(shop) == 0


def test_payment_down_releases_the_reservation_and_a_retry_places_afresh(shop):
    order = create(shop)
    shop.settings.COMMERCE_PAYMENT_URL = DEAD
    response = place(shop, order, HTTP_IDEMPOTENCY_KEY="k")
    assert (response.status_code, response.json()["code"]) == (503, "PAYMENT_UNAVAILABLE")
    assert order_of(shop, order)["status"] == "DRAFT" and reserved(shop) == 0
    assert Reservation.objects.get(order_id=order["id"]).status == "RELEASED"
    shop.settings.COMMERCE_PAYMENT_URL = f"{shop.base}/v1/api/payment"
    retried = place(shop, order, HTTP_IDEMPOTENCY_KEY="k")  # the failed first request freed the key
    assert retried.status_code == 200, retried.json()
    assert (retried.json()["status"], retried.json()["placementReference"]) == ("PLACED", f"{order['id']}-2")
    assert reserved(shop) == 2


def test_a_failed_commit_cancels_the_payment_and_releases_the_stock(shop, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="merchant_platform.errors")
    order = create(shop)

    def broken(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(SaleOrderLine.objects, "bulk_update", broken)
    response = place(shop, order)
    assert (response.status_code, response.json()["code"]) == (503, "DATABASE_UNAVAILABLE")
    (logged,) = [record.msg for record in caplog.records if "database.unavailable" in record.getMessage()]
    assert (logged["error"], logged["reason"]) == ("OperationalError", "server closed the connection unexpectedly")
    monkeypatch.undo()
    assert order_of(shop, order)["status"] == "DRAFT" and reserved(shop) == 0
    assert PaymentTransaction.objects.get(source_id=order["id"]).status == "CANCELLED"
    retried = place(shop, order).json()
    assert (retried["status"], retried["placementReference"]) == ("PLACED", f"{order['id']}-2")
    assert PaymentTransaction.objects.get(source_id=f"{order['id']}-2").status == "NEW"


def test_cancel_a_placed_order(shop):
    order = place(shop, create(shop)).json()
    cancelled = shop.client.post(f"{ORDERS}/{order['id']}/actions/cancel", format="json").json()
    assert (cancelled["status"], cancelled["closingReason"]) == ("CANCELLED", "CANCELLED")
    assert PaymentTransaction.objects.get(source_id=order["id"]).status == "CANCELLED"
    assert reserved(shop) == 0
    # payment's transaction.cancelled webhook arrives afterwards: nothing more happens.
    deliver(shop)
    assert order_of(shop, order)["status"] == "CANCELLED"


def test_payment_cancelled_at_payment_cancels_the_order(shop):
    order = place(shop, create(shop)).json()
    payment.transaction_cancel(transaction_id=int(order["paymentTransactionId"]))
    deliver(shop)
    body = order_of(shop, order)
    assert (body["status"], body["closingReason"]) == ("CANCELLED", "PAYMENT_CANCELLED")
    assert reserved(shop) == 0


def test_unpaid_orders_expire_and_a_paid_one_is_not_expired(shop):
    unpaid = place(shop, create(shop)).json()
    paid = place(shop, create(shop, quantity=1)).json()
    SaleOrder.objects.filter(pk__in=[unpaid["id"], paid["id"]]).update(expires_at=timezone.now())
    # Paid at payment, but its webhook has not arrived yet: the sweep must not expire it.
    attempt = paid["payment"]["attempts"][0]
    fields = {"prov_TxnRef": attempt["code"], "prov_Amount": str(attempt["amount"] * 100), "prov_ResponseCode": "00"}
    assert requests.post(f"{shop.base}/api/pay/system/ipn", json=signed(fields, shop.secret), timeout=10).json()["RspCode"] == "00"
    assert sales.orders_expire_due() == 1
    expired = order_of(shop, unpaid)
    assert (expired["status"], expired["closingReason"]) == ("EXPIRED", "UNPAID_IN_TIME")
    assert PaymentTransaction.objects.get(source_id=unpaid["id"]).status == "CANCELLED"
    assert order_of(shop, paid)["status"] == "PAID"
    assert reserved(shop) == 1  # the paid order's unit stays held until payment.success deducts it


def test_drafts_change_and_illegal_moves_are_409(shop):
    order = create(shop)
    changed = shop.client.patch(f"{ORDERS}/{order['id']}", {"lines": [{"variantId": str(shop.variant.id), "quantity": 4}]}, format="json")
    assert changed.status_code == 200 and changed.json()["netAmount"] == 5000
    fulfil = shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json")
    assert (fulfil.status_code, fulfil.json()["code"]) == (409, "ILLEGAL_TRANSITION")
    place(shop, order)
    late = shop.client.patch(f"{ORDERS}/{order['id']}", {"note": "x"}, format="json")
    assert (late.status_code, late.json()["code"]) == (409, "ILLEGAL_TRANSITION")


def test_bad_orders_are_400_naming_the_field(shop):
    other_merchant = new_merchant()
    foreign = new_variant(new_product(other_merchant.id).id)
    usd = new_variant(shop.product.id, currency="USD")
    cases = [
        ({"lines": []}, "lines"),
        ({"lines": [{"variantId": str(foreign.id), "quantity": 1}]}, "lines[0].variantId"),
        ({"lines": [{"variantId": str(usd.id), "quantity": 1}]}, "lines[0].variantId"),
        ({"lines": [{"variantId": str(shop.variant.id), "quantity": 0}]}, "lines"),
        ({"paymentChannel": "CASH"}, "paymentChannel"),
        ({"total": 1}, "total"),
    ]
    for change, field in cases:
        body = {"merchantId": str(shop.merchant.id), "lines": [{"variantId": str(shop.variant.id), "quantity": 1}], **change}
        response = shop.client.post(ORDERS, body, format="json")
        assert response.status_code == 400, (change, response.json())
        assert any(error["field"].startswith(field) for error in response.json()["errors"]), (field, response.json())


def test_another_merchants_orders_are_404(shop):
    order = create(shop)
    stranger = make_caller(roles=["OWNER"])
    new_merchant(created_by=stranger.user_id)
    assert stranger.client().get(f"{ORDERS}/{order['id']}").status_code == 404
    assert stranger.client().post(f"{ORDERS}/{order['id']}/actions/place", format="json").status_code == 404
    assert stranger.client().get(ORDERS).json()["count"] == 0


def test_a_placing_holds_its_own_order_only():
    """While another request places an order, placing it again is 409 ORDER_BUSY; an order whose id
    has the same low 31 bits (one worker, one sequence number, 2^9 ms apart) is not held."""
    order_id = 384059414799732737
    holding, release = threading.Event(), threading.Event()

    def place_elsewhere() -> None:
        from django.db import connections

        try:
            with placing._placing(order_id):
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    other = threading.Thread(target=place_elsewhere)
    other.start()
    try:
        assert holding.wait(30)
        placed = []
        with pytest.raises(Conflict) as busy, placing._placing(order_id):
            placed.append(order_id)
        assert busy.value.code == "ORDER_BUSY"
        with placing._placing(order_id + 2**31):
            placed.append(order_id + 2**31)
        assert placed == [order_id + 2**31]  # only the order nobody else was placing
    finally:
        release.set()
        other.join(30)
