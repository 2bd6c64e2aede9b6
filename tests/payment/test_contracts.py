"""payment.success as payment writes it is what its consumers read (docs/events.md): inventory's
validation accepts it and finds the order and its lines; finance recognises the event and finds the
finance account, the amount and the currency on the attempt, and the tax the transaction includes."""

from __future__ import annotations

import json

import pytest

from apps.finance.consumers import SUCCESS_EVENTS
from apps.inventory.serializers import PaymentSuccessSerializer
from apps.payment import services
from apps.payment.models import OutboxMessage
from merchant_platform.messaging import topics
from tests.payment.conftest import new_merchant_id, signed

pytestmark = pytest.mark.django_db(databases="__all__")


def test_payment_success_matches_what_inventory_and_finance_read(client, secret):
    from tests.payment.conftest import add_integration

    merchant_id = new_merchant_id()
    add_integration(merchant_id, channel="SYSTEM", secret=secret)
    lines = [
        {"variantId": "7390172837490688", "quantity": 2},
        {"lineId": "b", "variantId": "7390172837490999", "quantity": 1, "locationId": "42"},
    ]
    created = services.transaction_create(
        merchant_id=merchant_id,
        source_id="SO-1042",
        amount=2500,
        currency="EUR",
        channel="SYSTEM",
        finance_account_id=77,
        tax_amount=417,
        lines=[{"lineId": "1", **lines[0]}, lines[1]],
    )
    services.attempt_send(attempt_id=created.attempt.id)
    fields = {"prov_TxnRef": created.attempt.code, "prov_Amount": "250000", "prov_ResponseCode": "00", "prov_TransactionNo": "1"}
    response = client.post("/api/pay/system/ipn", json.dumps(signed(fields, secret)), content_type="application/json")
    assert response.json()["RspCode"] == "00"
    [row] = OutboxMessage.objects.filter(topic=topics.PAYMENT_SUCCESS.name, key="SO-1042")
    value = json.loads(row.value)

    inventory = PaymentSuccessSerializer(data=value)
    assert inventory.is_valid(), inventory.errors
    assert inventory.validated_data["order_id"] == "SO-1042" and inventory.validated_data["merchant_id"] == merchant_id
    assert [line["line_id"] for line in inventory.validated_data["lines"]] == ["1", "b"]

    assert value["event"] in SUCCESS_EVENTS
    # Consumers check ownership on these: the merchant and the transaction, in both events.
    assert value["order"]["merchantId"] == str(merchant_id) and value["order"]["transactionId"] == str(created.transaction.id)
    assert value["order"]["sourceType"] == "ORDER" and value["transaction"]["sourceType"] == "ORDER"
    [settled] = OutboxMessage.objects.filter(
        topic=topics.PAYMENT_EVENTS.name, headers__eventType="transaction.settled", key=str(created.transaction.id)
    )
    settled = json.loads(settled.value)["transaction"]
    assert (settled["id"], settled["merchantId"]) == (str(created.transaction.id), str(merchant_id))
    assert value["attempt"]["financeAccountId"] == "77" and value["attempt"]["amount"] == 2500 and value["attempt"]["currency"] == "EUR"
    # Finance splits the SALE voucher's revenue into net and tax payable on the tax the amount includes.
    assert (value["transaction"]["amount"], value["transaction"]["taxAmount"]) == (2500, 417)
