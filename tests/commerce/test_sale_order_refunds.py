"""Refunds of paid sale orders (issue 33) against the real payment, inventory and taxation APIs on the
live server: the amounts (cumulative rounding per line, so refunding everything gives back exactly
the gross and the tax), the validation, tenant isolation, idempotency, the order's states, payment's
refund webhooks followed like settlements, the admin action and concurrent refunds of one order."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connections
from django.utils import timezone

from apps.commerce.models import PaymentSubscription, PaymentWebhookReceipt, SaleOrderLine, SaleReturn, UnmatchedRefund
from apps.commerce.sales import clients
from apps.commerce.sales import services as sales
from apps.commerce.sales.services import refunds
from apps.commerce.sales.services.records import room
from apps.commerce.sales.services.refunds import cumulative_share, line_refund
from apps.inventory import services as inventory
from apps.payment import services as payment
from apps.payment.fake_provider import FakeProvider
from apps.payment.models import PaymentTransaction, Refund, WebhookConfig, WebhookDelivery
from merchant_platform.errors import ApiError
from merchant_platform.realtime import group_name
from tests.commerce.conftest import new_merchant, new_variant
from tests.commerce.test_sale_orders import DEAD, ORDERS, create, deliver, order_of, pay, place
from tests.payment.conftest import IPN_PATHS, add_integration
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


# --- Amounts ----------------------------------------------------------------------------------------


def test_cumulative_rounding_is_half_even_in_integers():
    assert [cumulative_share(1000, 3, units) for units in range(4)] == [0, 333, 667, 1000]
    assert cumulative_share(5, 2, 1) == 2 and cumulative_share(7, 2, 1) == 4  # 2.5 -> 2, 3.5 -> 4
    assert cumulative_share(10**15, 10**9, 10**9 - 1) == 10**15 - 10**6  # exact, no float


def test_refunding_every_unit_in_any_steps_gives_back_exactly_the_gross_and_the_tax_and_no_net_below_zero():
    def steps(total):  # every way to refund `total` units in successive returns
        if total == 0:
            yield []
            return
        for first in range(1, total + 1):
            for rest in steps(total - first):
                yield [first, *rest]

    for quantity in range(1, 7):
        for gross in (0, 1, 5, 6, 7, 100, 101, 2975):
            for tax in sorted({tax for tax in (0, 1, gross // 7, gross // 2, gross - 1, gross) if 0 <= tax <= gross}):
                line = SaleOrderLine(quantity=quantity, gross_amount=gross, tax_amount=tax)
                for split in steps(quantity):
                    units = given_gross = given_tax = 0
                    for part in split:
                        units += part
                        net, tax_part, gross_part = line_refund(line, units_after=units, gross_before=given_gross, tax_before=given_tax)
                        assert min(net, tax_part, gross_part) >= 0 and net + tax_part == gross_part
                        given_gross, given_tax = given_gross + gross_part, given_tax + tax_part
                    assert (given_gross, given_tax) == (gross, tax), (quantity, gross, tax, split)


# --- Helpers ----------------------------------------------------------------------------------------


def taxed(shop, rate: int = 19) -> None:
    from apps.taxation import services as taxation

    group = taxation.tax_group_create(merchant_id=shop.merchant.id, name="VAT", items=[{"name": "VAT", "rate": Decimal(rate)}])
    taxation.tax_set_provision(product_id=shop.product.id, tax_group_id=group.id, merchant_id=shop.merchant.id)
    shop.product.tax_group_id = group.id
    shop.product.save()


def second_line(shop, price: int = 333):
    variant = new_variant(shop.product.id, price_amount=price)
    item = inventory.item_sync(
        variant_id=variant.id,
        merchant_id=shop.merchant.id,
        product_id=shop.product.id,
        sku=variant.sku,
        currency="EUR",
        unit_cost_amount=100,
    )
    inventory.stock_adjust(item_id=item.id, delta=10, reason="initial stock")
    return variant


def paid(shop, quantity: int = 3, *, lines: list | None = None) -> dict:
    order = create(shop, quantity=quantity, **({"lines": lines} if lines else {}))
    placed = place(shop, order)
    assert placed.status_code == 200, placed.json()
    pay(shop, placed.json())
    body = order_of(shop, order)
    assert body["status"] == "PAID"
    return body


def refund(shop, order: dict, lines: list[dict], *, reason: str = "Damaged in transit", client=None, **headers):
    return (client or shop.client).post(
        f"{ORDERS}/{order['id']}/actions/refund", {"lines": lines, "reason": reason}, format="json", **headers
    )


def line(line_id: str = "1", quantity: int = 1, restock: bool = True, **more) -> dict:
    return {"lineId": line_id, "quantity": quantity, "restock": restock, **more}


def listen(merchant_id: int, action, count: int, timeout: float = 15.0) -> list[dict]:
    """What the merchant's commerce room receives while `action` runs (as a /stream replica would)."""
    layer = get_channel_layer()

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_name(room(merchant_id)), channel)
        try:
            await asyncio.get_running_loop().run_in_executor(None, action)
            received = []
            with contextlib.suppress(TimeoutError):
                while len(received) < count + 1:  # one more than expected: nothing extra may come
                    received.append(await asyncio.wait_for(layer.receive(channel), timeout=timeout if len(received) < count else 1.5))
            return received
        finally:
            await layer.group_discard(group_name(room(merchant_id)), channel)

    return async_to_sync(scenario)()


# --- Validation, tenant, idempotency ------------------------------------------------------------------


def test_refusals_name_the_line_and_record_nothing(shop):
    order = paid(shop, quantity=3)
    cases = [
        ([line("9")], 400, "REFUND_LINE_UNKNOWN", "lines[0].lineId"),
        ([line("1", 4)], 400, "REFUND_LINE_QUANTITY_EXCEEDED", "lines[0].quantity"),
        ([line("1", 1), line("1", 1)], 400, "VALIDATION_ERROR", "lines[1].lineId"),
        # the serializer's refusals name fields its way (lines.<i>.<field>)
        ([line("1", 0)], 400, "VALIDATION_ERROR", "lines.0.quantity"),
        ([{"lineId": "1", "quantity": 1}], 400, "VALIDATION_ERROR", "lines.0.restock"),
        ([], 400, "VALIDATION_ERROR", "lines"),
    ]
    for lines, status, code, field in cases:
        response = refund(shop, order, lines)
        body = response.json()
        assert (response.status_code, body["code"]) == (status, code), (lines, body)
        assert field in [error["field"] for error in body["errors"]], (lines, body)
    assert refund(shop, order, [line("1", 4)]).json()["refundable"] == 3
    assert refund(shop, order, [line()], reason="").status_code == 400
    foreign = inventory.location_create(merchant_id=new_merchant().id, name="Elsewhere", code="ELSE")
    elsewhere = refund(shop, order, [line(locationId=str(foreign.id))]).json()
    assert (elsewhere["code"], elsewhere["errors"][0]["field"]) == ("VALIDATION_ERROR", "lines[0].locationId")
    assert not SaleReturn.objects.filter(order_id=order["id"]).exists()
    assert order_of(shop, order)["status"] == "PAID"


def test_only_a_paid_order_is_refunded(shop):
    draft = create(shop)
    response = refund(shop, draft, [line()])
    assert (response.status_code, response.json()["code"]) == (409, "ILLEGAL_TRANSITION")
    placed = place(shop, create(shop)).json()
    assert refund(shop, placed, [line()]).json()["code"] == "ILLEGAL_TRANSITION"


def test_another_merchants_order_is_404_and_a_cashier_may_not_refund(shop):
    order = paid(shop)
    stranger = make_caller(roles=["OWNER"])
    new_merchant(created_by=stranger.user_id)
    assert refund(shop, order, [line()], client=stranger.client()).status_code == 404
    cashier = make_caller(roles=[("CASHIER", shop.merchant.id)], joined=[shop.merchant.id]).client()
    assert refund(shop, order, [line()], client=cashier).status_code == 403
    assert not SaleReturn.objects.exists()


def test_a_refund_is_recorded_once_per_idempotency_key(shop):
    order = paid(shop)
    first = refund(shop, order, [line("1", 1)], HTTP_IDEMPOTENCY_KEY="refund-1")
    assert first.status_code == 201, first.json()
    replay = refund(shop, order, [line("1", 1)], HTTP_IDEMPOTENCY_KEY="refund-1")
    assert (replay.status_code, replay["Idempotent-Replayed"], replay.json()["id"]) == (201, "true", first.json()["id"])
    reused = refund(shop, order, [line("1", 2)], HTTP_IDEMPOTENCY_KEY="refund-1")
    assert (reused.status_code, reused.json()["code"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    assert SaleReturn.objects.filter(order_id=order["id"]).count() == 1
    assert Refund.objects.filter(transaction_id=order["paymentTransactionId"]).count() == 1
    # The merchant's subscription, made on its first placing, asks for the refund outcomes.
    subscription = PaymentSubscription.objects.get(merchant_id=shop.merchant.id)
    assert subscription.event_types == clients.EVENT_TYPES
    assert set(WebhookConfig.objects.get(pk=subscription.webhook_id).event_types) == set(clients.EVENT_TYPES)


# --- The flow through payment -------------------------------------------------------------------------


def refund_at_payment(sale_return: dict) -> Refund:
    return Refund.objects.get(pk=sale_return["paymentRefundId"])


def test_a_taxed_order_refunded_in_two_returns_gives_back_exactly_its_gross_and_tax(shop):
    taxed(shop)
    extra = second_line(shop, price=333)
    order = paid(shop, lines=[{"variantId": str(shop.variant.id), "quantity": 3}, {"variantId": str(extra.id), "quantity": 7}])
    first_line, other_line = order["lines"]
    assert order["taxAmount"] > 0
    first = refund(shop, order, [line("1", 1), line("2", 3, restock=False)])
    assert first.status_code == 201, first.json()
    body = first.json()
    share = {  # the cumulative rounding of each line at the units refunded
        "gross": cumulative_share(first_line["grossAmount"], 3, 1) + cumulative_share(other_line["grossAmount"], 7, 3),
        "tax": cumulative_share(first_line["taxAmount"], 3, 1) + cumulative_share(other_line["taxAmount"], 7, 3),
    }
    assert (body["status"], body["grossAmount"], body["taxAmount"]) == ("PENDING", share["gross"], share["tax"])
    assert body["netAmount"] == body["grossAmount"] - body["taxAmount"]
    at_payment = refund_at_payment(body)
    assert (at_payment.amount, at_payment.tax_amount, at_payment.currency) == (share["gross"], share["tax"], "EUR")
    assert [(r["lineId"], r["variantId"], r["quantity"], r["restock"]) for r in at_payment.lines] == [
        ("1", str(shop.variant.id), 1, True),
        ("2", str(extra.id), 3, False),
    ]
    assert order_of(shop, order)["status"] == "PAID"  # until payment says the money went back

    confirmed = listen(shop.merchant.id, lambda: (payment.refund_confirm(refund_id=at_payment.id), deliver(shop)), count=1)
    assert [(m["event"], m["payload"]["status"], m["payload"]["refundedAmount"]) for m in confirmed] == [
        ("order.refunded", "PARTIALLY_REFUNDED", share["gross"])
    ]
    partly = order_of(shop, order)
    assert (partly["status"], partly["refundedAmount"], partly["refundedTaxAmount"]) == ("PARTIALLY_REFUNDED", share["gross"], share["tax"])
    assert partly["returns"][0]["status"] == "SUCCEEDED" and partly["returns"][0]["paymentRefundId"] == str(at_payment.id)

    rest = refund(shop, order, [line("1", 2), line("2", 4)]).json()
    payment.refund_confirm(refund_id=refund_at_payment(rest).id)
    deliver(shop)
    done = order_of(shop, order)
    assert (done["status"], done["refundedAmount"], done["refundedTaxAmount"]) == ("REFUNDED", order["grossAmount"], order["taxAmount"])
    assert rest["grossAmount"] + body["grossAmount"] == order["grossAmount"]
    txn = PaymentTransaction.objects.get(pk=order["paymentTransactionId"])
    assert (txn.status, txn.refunded_amount) == ("REFUNDED", order["grossAmount"])
    again = refund(shop, order, [line("1", 1)])
    assert (again.status_code, again.json()["code"]) == (409, "REFUND_EXCEEDS_REFUNDABLE")
    summary = shop.client.get(f"/v1/api/commerce/merchants/{shop.merchant.id}/summary").json()
    assert summary["revenueThisMonth"] == {"EUR": 0} and summary["orders"]["REFUNDED"] == 1


def test_a_refund_the_provider_makes_at_once_moves_the_order_in_the_same_request(shop):
    """A QR payment is refunded by the provider, which answers synchronously: the return is
    SUCCEEDED in the 201 and the order PARTIALLY_REFUNDED; the webhook told later changes nothing."""
    provider = FakeProvider(secret=shop.secret).start()
    try:
        shop.settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
        add_integration(shop.merchant.id, channel="QR", secret=shop.secret, endpoint=provider.url)
        placed = place(shop, create(shop, quantity=2, paymentChannel="QR")).json()
        assert placed["status"] == "PLACED", placed
        pay(shop, placed, ipn_path=IPN_PATHS["QR"])
        order = order_of(shop, placed)
        assert order["status"] == "PAID"
        response = refund(shop, order, [line("1", 1)], HTTP_IDEMPOTENCY_KEY="qr-refund")
        assert response.status_code == 201, response.json()
        body = response.json()
        assert (body["status"], body["grossAmount"], body["paymentRefundId"]) == ("SUCCEEDED", 1250, str(refund_at_payment(body).id))
        assert order_of(shop, order)["status"] == "PARTIALLY_REFUNDED"
        assert provider.refunds[refund_at_payment(body).code].amount == 1250 * 100
        deliver(shop)  # refund.succeeded arrives after the answer: already applied
        delivered = WebhookDelivery.objects.get(merchant_id=shop.merchant.id, event_type="refund.succeeded")
        assert delivered.status == "SUCCEEDED" and PaymentWebhookReceipt.objects.filter(message_id=delivered.message_id).exists()
        assert order_of(shop, order)["refundedAmount"] == 1250
    finally:
        provider.stop()


def test_a_fulfilled_order_is_refunded_and_is_not_fulfilled_or_cancelled_again(shop):
    order = paid(shop, quantity=2)
    assert shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json").json()["status"] == "FULFILLED"
    first = refund(shop, order, [line("1", 1)]).json()
    payment.refund_confirm(refund_id=refund_at_payment(first).id)
    deliver(shop)
    assert order_of(shop, order)["status"] == "PARTIALLY_REFUNDED"
    fulfil = shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json")
    assert (fulfil.status_code, fulfil.json()["code"]) == (409, "ILLEGAL_TRANSITION")
    cancel = shop.client.post(f"{ORDERS}/{order['id']}/actions/cancel", format="json")
    assert (cancel.status_code, cancel.json()["code"]) == (409, "ILLEGAL_TRANSITION")


def test_a_partly_refunded_order_not_yet_handed_over_is_fulfilled_once_and_keeps_its_status(shop):
    order = paid(shop, quantity=2)
    first = refund(shop, order, [line("1", 1)]).json()
    payment.refund_confirm(refund_id=refund_at_payment(first).id)
    deliver(shop)
    assert order_of(shop, order)["fulfilledAt"] is None
    fulfil = shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json")
    assert fulfil.status_code == 200 and fulfil.json()["status"] == "PARTIALLY_REFUNDED" and fulfil.json()["fulfilledAt"]
    again = shop.client.post(f"{ORDERS}/{order['id']}/actions/fulfill", format="json")
    assert (again.status_code, again.json()["code"]) == (409, "ILLEGAL_TRANSITION")


def test_a_failed_refund_frees_its_units_and_a_redelivery_changes_nothing(shop):
    order = paid(shop, quantity=2)
    first = refund(shop, order, [line("1", 2)]).json()
    pending = refund(shop, order, [line("1", 1)])  # the PENDING return holds both units
    assert (pending.status_code, pending.json()["code"], pending.json()["refundable"]) == (409, "REFUND_EXCEEDS_REFUNDABLE", 0)
    payment.refund_fail(refund_id=refund_at_payment(first).id, reason="till empty")
    deliver(shop)
    failed = SaleReturn.objects.get(pk=first["id"])
    assert (failed.status, failed.failure_reason) == ("FAILED", "till empty")
    assert order_of(shop, order)["status"] == "PAID"
    delivery = WebhookDelivery.objects.get(merchant_id=shop.merchant.id, event_type="refund.failed")
    payment.webhook_redeliver(delivery_id=delivery.id)
    deliver(shop)
    assert PaymentWebhookReceipt.objects.filter(message_id=delivery.message_id).count() == 1
    assert SaleReturn.objects.get(pk=first["id"]).status == "FAILED"
    second = refund(shop, order, [line("1", 2)])
    assert second.status_code == 201, second.json()
    payment.refund_confirm(refund_id=refund_at_payment(second.json()).id)
    deliver(shop)
    assert order_of(shop, order)["status"] == "REFUNDED"


def test_a_refund_payment_refuses_fails_the_return_with_payments_code(shop):
    order = paid(shop, quantity=2)
    # Money given back at payment outside this order's returns (an operator's refund by hand).
    payment.refund_create(
        transaction_id=int(order["paymentTransactionId"]), amount=order["grossAmount"], currency="EUR", reason="by hand", by_service=True
    )
    response = refund(shop, order, [line("1", 1)])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["status"], body["failureReason"], body["paymentRefundId"]) == ("FAILED", "REFUND_EXCEEDS_REFUNDABLE", None)
    assert order_of(shop, order)["status"] == "PAID"
    assert refund(shop, order, [line("1", 2)]).json()["status"] == "FAILED"  # the failed return's unit was free again


# --- Payment's webhooks: only this merchant's, this order's, this return's refund is applied -----------


def outcome_payload(shop, event: str = "refund.succeeded") -> dict:
    """The body payment would deliver (taken from its pending delivery, not sent)."""
    return WebhookDelivery.objects.filter(merchant_id=shop.merchant.id, event_type=event, status="PENDING").latest("created_at").payload


@pytest.mark.parametrize(
    ("refund_changes", "reason"),
    [
        ({"id": "12345"}, "UNKNOWN_REFUND"),
        ({"transactionId": "12345"}, "UNKNOWN_TRANSACTION"),
        ({"merchantId": "1"}, "OTHER_MERCHANT"),
        ({"sourceId": "elsewhere"}, "OTHER_REFERENCE"),
        ({"amount": 1}, "AMOUNT_MISMATCH"),
        ({"taxAmount": 1}, "AMOUNT_MISMATCH"),
        ({"currency": "USD"}, "CURRENCY_MISMATCH"),
        ({"status": "PENDING"}, "STATUS_MISMATCH"),
    ],
)
def test_a_refund_outcome_that_is_not_the_returns_is_recorded_not_applied(shop, refund_changes, reason):
    order = paid(shop)
    sale_return = refund(shop, order, [line("1", 2)]).json()
    payment.refund_confirm(refund_id=refund_at_payment(sale_return).id)
    real = outcome_payload(shop)
    forged = {**real, "refund": {**real["refund"], **refund_changes}}
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id=f"msg_{reason}", payload=forged) == "unmatched"
    row = UnmatchedRefund.objects.get(message_id=f"msg_{reason}")
    assert (row.merchant_id, row.reason, row.event_type) == (shop.merchant.id, reason, "refund.succeeded")
    assert SaleReturn.objects.get(pk=sale_return["id"]).status == "PENDING" and order_of(shop, order)["status"] == "PAID"
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_real", payload=real) == "refunded"
    assert order_of(shop, order)["status"] == "PARTIALLY_REFUNDED"


def test_a_refund_outcome_routed_to_another_merchant_or_contradicting_the_return_is_recorded(shop):
    order = paid(shop)
    sale_return = refund(shop, order, [line("1", 3)]).json()
    payment.refund_confirm(refund_id=refund_at_payment(sale_return).id)
    real = outcome_payload(shop)
    other = new_merchant()
    assert sales.webhook_apply(merchant_id=other.id, message_id="msg_other", payload=real) == "unmatched"
    assert UnmatchedRefund.objects.get(message_id="msg_other").reason == "UNKNOWN_TRANSACTION"
    deliver(shop)
    assert order_of(shop, order)["status"] == "REFUNDED"
    told_again = {**real, "refund": {**real["refund"]}}
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_again", payload=told_again) == "ignored"
    contradiction = {**real, "event": "refund.failed", "refund": {**real["refund"], "status": "FAILED"}}
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_contra", payload=contradiction) == "unmatched"
    assert UnmatchedRefund.objects.get(message_id="msg_contra").reason == "CONFLICTING_OUTCOME"
    assert SaleReturn.objects.get(pk=sale_return["id"]).status == "SUCCEEDED"


def test_an_outcome_that_overtakes_the_answer_is_refused_until_the_answer_is_recorded_and_the_sweep_resumes(shop):
    order = paid(shop)
    shop.settings.COMMERCE_PAYMENT_URL = DEAD
    sale_return = refund(shop, order, [line("1", 1)]).json()
    assert (sale_return["status"], sale_return["paymentRefundId"]) == ("PENDING", None)  # payment did not answer
    shop.settings.COMMERCE_PAYMENT_URL = f"{shop.base}/v1/api/payment"
    recorded = SaleReturn.objects.get(pk=sale_return["id"])
    # Payment made the refund (the request reached it) and its outcome arrives before commerce knows the refund's id.
    made = clients.refund_transaction(
        transaction_id=recorded.order.payment_transaction_id, key=str(recorded.id), body=refunds._payment_body(recorded)
    )
    payment.refund_confirm(refund_id=int(made["id"]))
    early = outcome_payload(shop)
    with pytest.raises(ApiError) as refused:
        sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_early", payload=early)
    assert refused.value.code == "REFUND_NOT_YET_RECORDED" and not PaymentWebhookReceipt.objects.filter(pk="msg_early").exists()
    SaleReturn.objects.filter(pk=recorded.id).update(created_at=timezone.now() - timedelta(minutes=5))
    assert sales.returns_resume() == 1  # asked again with the same key: payment answers the refund, SUCCEEDED
    resumed = SaleReturn.objects.get(pk=recorded.id)
    assert (resumed.status, resumed.payment_refund_id) == ("SUCCEEDED", int(made["id"]))
    assert Refund.objects.filter(transaction_id=order["paymentTransactionId"]).count() == 1
    assert sales.webhook_apply(merchant_id=shop.merchant.id, message_id="msg_early", payload=early) == "ignored"
    assert order_of(shop, order)["status"] == "PARTIALLY_REFUNDED"


def test_the_sweep_reads_an_outcome_whose_webhook_never_came(shop):
    order = paid(shop)
    sale_return = refund(shop, order, [line("1", 3)]).json()
    payment.refund_confirm(refund_id=refund_at_payment(sale_return).id)  # its webhook is never delivered
    assert sales.returns_resume() == 0  # too young: the request that made it may still be at work
    SaleReturn.objects.filter(pk=sale_return["id"]).update(created_at=timezone.now() - timedelta(minutes=5))
    assert sales.returns_resume() == 1
    assert order_of(shop, order)["status"] == "REFUNDED"


def test_a_subscription_made_before_refunds_is_changed_at_payment_by_the_first_refund(shop):
    order = paid(shop)
    subscription = PaymentSubscription.objects.get(merchant_id=shop.merchant.id)
    old = ["transaction.settled", "transaction.cancelled", "attempt.expired"]
    WebhookConfig.objects.filter(pk=subscription.webhook_id).update(event_types=old)
    PaymentSubscription.objects.filter(pk=subscription.pk).update(event_types=[])
    sale_return = refund(shop, order, [line("1", 1)]).json()
    assert set(WebhookConfig.objects.get(pk=subscription.webhook_id).event_types) >= {"refund.succeeded", "refund.failed", *old}
    assert PaymentSubscription.objects.get(pk=subscription.pk).event_types == clients.EVENT_TYPES
    payment.refund_confirm(refund_id=refund_at_payment(sale_return).id)
    deliver(shop)  # the webhook now carries the outcome
    assert order_of(shop, order)["status"] == "PARTIALLY_REFUNDED"


# --- Admin and concurrency --------------------------------------------------------------------------


def test_the_admin_refunds_a_whole_order_restocked_through_the_service(shop, admin_client):
    order = paid(shop, quantity=2)
    admin_client.post("/admin/commerce/saleorder/", {"action": "refund", "_selected_action": [order["id"]]})
    sale_return = SaleReturn.objects.get(order_id=order["id"])
    assert (sale_return.gross_amount, sale_return.created_by) == (order["grossAmount"], None) and "admin" in sale_return.reason
    assert [(r.order_line.line_number, r.quantity, r.restock) for r in sale_return.lines.all()] == [(1, 2, True)]
    assert admin_client.get(f"/admin/commerce/saleorder/{order['id']}/change/").status_code == 200
    assert admin_client.get(f"/admin/commerce/salereturn/{sale_return.id}/change/").status_code == 200
    again = admin_client.post("/admin/commerce/saleorder/", {"action": "refund", "_selected_action": [order["id"]]})
    assert again.status_code == 302 and "NOTHING_TO_REFUND" in admin_client.get("/admin/commerce/saleorder/").content.decode()
    payment.refund_confirm(refund_id=sale_return.payment_refund_id)
    deliver(shop)
    assert order_of(shop, order)["status"] == "REFUNDED"


def test_concurrent_refunds_of_one_order_never_give_back_a_unit_twice(shop):
    order = paid(shop, quantity=3)
    start = threading.Barrier(2)
    results: list = []

    def take_two() -> None:
        try:
            start.wait(10)
            results.append(
                sales.order_refund(order_id=int(order["id"]), lines=[{"line_id": "1", "quantity": 2, "restock": True}], reason="r")
            )
        except ApiError as exc:
            results.append(exc.code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=take_two) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(type(result).__name__ if isinstance(result, SaleReturn) else result for result in results) == [
        "REFUND_EXCEEDS_REFUNDABLE",
        "SaleReturn",
    ]
    assert SaleReturn.objects.filter(order_id=order["id"]).count() == 1
    assert Refund.objects.filter(transaction_id=order["paymentTransactionId"]).count() == 1
