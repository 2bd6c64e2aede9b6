"""A sale order is paid only by the settlement of the transaction its own placing opened, for its
gross and currency, while it awaits payment; any other settlement is recorded for reconciliation,
logged at error level and acknowledged, never applied."""

from __future__ import annotations

import logging

import pytest

from apps.commerce.models import SaleOrder, UnmatchedSettlement
from apps.commerce.sales import services as sales
from apps.payment import services as payment
from apps.payment.models import PaymentTransaction, WebhookDelivery
from tests.commerce.conftest import new_merchant
from tests.commerce.test_sale_orders import ORDERS, create, deliver, order_of, pay, place

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def unmatched(shop) -> list[tuple[str, str]]:
    return list(UnmatchedSettlement.objects.filter(merchant_id=shop.merchant.id).values_list("source_id", "reason"))


def errors_logged(caplog, event: str) -> list[dict]:
    return [r.msg for r in caplog.records if r.levelno == logging.ERROR and isinstance(r.msg, dict) and r.msg.get("event") == event]


def test_a_payment_opened_by_hand_on_a_failed_placings_reference_does_not_pay_the_order(shop, caplog):
    """The team's reproduction: a placing refused for stock left its reference; the lines were cut
    to one unit and a transaction of 0.01 opened by hand under that reference and paid."""
    caplog.set_level(logging.INFO)
    sales.subscription_ensure(merchant_id=shop.merchant.id)
    order = create(shop, quantity=1000)
    refused = place(shop, order)
    assert (refused.status_code, refused.json()["code"]) == (409, "INSUFFICIENT_STOCK")
    reference = order_of(shop, order)["placementReference"]
    assert reference
    cut = shop.client.patch(f"{ORDERS}/{order['id']}", {"lines": [{"variantId": str(shop.variant.id), "quantity": 1}]}, format="json")
    assert cut.status_code == 200, cut.json()
    opened = payment.transaction_create(merchant_id=shop.merchant.id, source_id=reference, amount=1, currency="EUR", channel="SYSTEM")
    opened = {"id": str(opened.transaction.id), "attempts": [{"code": opened.attempt.code, "amount": 1}]}
    pay(shop, {"payment": opened})

    assert order_of(shop, order)["status"] == "DRAFT"
    settled = WebhookDelivery.objects.get(merchant_id=shop.merchant.id, event_type="transaction.settled")
    assert settled.status == "SUCCEEDED"  # acknowledged: payment does not retry it forever
    assert unmatched(shop) == [(reference, "UNKNOWN_TRANSACTION")]
    (logged,) = errors_logged(caplog, "commerce.settlement.unmatched")
    assert (logged["reason"], logged["transactionId"]) == ("UNKNOWN_TRANSACTION", opened["id"])
    fulfil = shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json")
    assert (fulfil.status_code, fulfil.json()["code"]) == (409, "ILLEGAL_TRANSITION")

    # Placing now uses a fresh reference and opens its own transaction, for the order's gross.
    placed = place(shop, order).json()
    assert placed["status"] == "PLACED" and placed["placementReference"] != reference
    own = PaymentTransaction.objects.get(pk=placed["paymentTransactionId"])
    assert (own.source_id, own.amount) == (placed["placementReference"], 1250)
    pay(shop, placed)
    assert order_of(shop, order)["status"] == "PAID"


def settlement(order: dict, **changes) -> dict:
    txn = {
        "id": order["paymentTransactionId"],
        "merchantId": order["merchantId"],
        "sourceId": order["placementReference"],
        "amount": order["grossAmount"],
        "paidAmount": order["grossAmount"],
        "currency": order["currency"],
        "status": "SETTLED",
    }
    return {"event": "transaction.settled", "transaction": {**txn, **changes}}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"id": "12345"}, "UNKNOWN_TRANSACTION"),
        ({"id": "not a number"}, "UNKNOWN_TRANSACTION"),
        ({"merchantId": "1"}, "OTHER_MERCHANT"),
        ({"sourceId": "elsewhere"}, "OTHER_REFERENCE"),
        ({"amount": 1, "paidAmount": 1}, "AMOUNT_MISMATCH"),
        ({"currency": "USD"}, "CURRENCY_MISMATCH"),
        ({"status": "NEW"}, "NOT_SETTLED"),
    ],
)
def test_a_settlement_that_does_not_match_the_placed_order_is_recorded_not_applied(shop, changes, reason, caplog):
    order = place(shop, create(shop)).json()
    outcome = sales.webhook_apply(merchant_id=shop.merchant.id, message_id=f"msg_{reason}", payload=settlement(order, **changes))
    assert outcome == "unmatched"
    assert order_of(shop, order)["status"] == "PLACED"
    row = UnmatchedSettlement.objects.get(message_id=f"msg_{reason}")
    assert (row.merchant_id, row.reason) == (shop.merchant.id, reason)
    assert errors_logged(caplog, "commerce.settlement.unmatched")
    # The order's own settlement still pays it.
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_own", payload=settlement(order)) == "paid"


def test_a_settlement_routed_to_another_merchant_does_not_pay_its_order(shop):
    order = place(shop, create(shop)).json()
    other = new_merchant()
    assert sales.webhook_apply(merchant_id=other.id, message_id="msg_other", payload=settlement(order)) == "unmatched"
    assert order_of(shop, order)["status"] == "PLACED"
    assert UnmatchedSettlement.objects.get(message_id="msg_other").reason == "UNKNOWN_TRANSACTION"


def test_a_settlement_of_an_order_no_longer_awaiting_payment_is_recorded(shop):
    order = place(shop, create(shop)).json()
    cancelled = shop.client.post(f"{ORDERS}/{order['id']}/actions/cancel", format="json")
    assert cancelled.json()["status"] == "CANCELLED"
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_late", payload=settlement(order)) == "unmatched"
    row = UnmatchedSettlement.objects.get(message_id="msg_late")
    assert (row.reason, row.order_id) == ("NOT_AWAITING_PAYMENT", int(order["id"]))
    assert SaleOrder.objects.get(pk=order["id"]).status == "CANCELLED"


def test_a_paid_order_settled_again_changes_nothing(shop):
    order = place(shop, create(shop)).json()
    pay(shop, order)
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_again", payload=settlement(order)) == "ignored"
    assert not UnmatchedSettlement.objects.exists()
    deliver(shop)


def test_a_cancellation_naming_another_reference_or_merchant_closes_nothing(shop):
    order = place(shop, create(shop)).json()
    cancelled = settlement(order, status="CANCELLED") | {"event": "transaction.cancelled"}
    for name, changes in (("reference", {"sourceId": "elsewhere"}), ("merchant", {"merchantId": "1"})):
        payload = {**cancelled, "transaction": {**cancelled["transaction"], **changes}}
        assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id=f"msg_cancel_{name}", payload=payload) == "ignored"
    assert order_of(shop, order)["status"] == "PLACED"
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_cancel_own", payload=cancelled) == "cancelled"
