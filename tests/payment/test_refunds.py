"""Refunds (issue 33) over HTTP with the fake provider: full and partial refunds, the prorated tax,
idempotency, the error codes, tenant isolation, lines, the events (payment.events and
payment.refunded outbox rows, checked against the contracts), webhook deliveries, the provider's
synchronous and asynchronous answers (a signed callback), a timeout left PENDING until the resolver
asks, the cashier's SYSTEM refunds, and 20 concurrent refunds that never give back more than paid."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import urlencode

import pytest
import requests
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import IntegrityError, connections, transaction
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook

from apps.payment import services, tasks
from apps.payment.models import OutboxMessage, PaymentTransaction, Refund
from merchant_platform.messaging import contracts, topics
from merchant_platform.realtime import group_name
from merchant_platform.verification.service_accounts import basic_auth_header
from tests.payment.conftest import BASE, IPN_PATHS, add_integration, ipn_fields, new_merchant_id, open_transaction, signed
from tests.payment.test_flow import end_offsets, ensure_topics, records_after
from tests.payment.test_webhooks import Receiver, deliver_due, subscribe
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__")

REFUND_CALLBACK = "/api/pay/provider/refund/ipn"


def settle(client, txn: dict, secret: str) -> None:
    """The customer pays the transaction's attempt: a signed IPN, as the provider sends it."""
    attempt = txn["attempts"][-1]
    path = IPN_PATHS[attempt["channel"]]
    fields = signed(ipn_fields(attempt), secret)
    assert client.post(path, json.dumps(fields), content_type="application/json").json()["RspCode"] == "00"


def paid_order(service_client, pay, merchant, **fields) -> dict:
    """A settled ORDER transaction (the sale side's), with two lines."""
    lines = [{"lineId": "1", "variantId": "501", "quantity": 2}, {"lineId": "2", "variantId": "502", "quantity": 1}]
    txn = open_transaction(service_client, merchant, amount=3000, taxAmount=500, lines=lines, financeAccountId="77", **fields)
    pay(txn)
    return txn


def paid_manual(owner, pay, merchant, **fields) -> dict:
    txn = open_transaction(owner, merchant, **fields)
    pay(txn)
    return txn


def refund(caller, txn: dict, merchant=None, *, key: str | None = None, **fields):
    body = {"amount": 1000, "currency": "EUR", "reason": "customer returned it", **fields}
    if merchant is not None:
        body["merchantId"] = str(merchant)
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return caller.post(f"{BASE}/transactions/{txn['id']}/refunds", body, format="json", **headers)


def outbox(topic, key) -> list[dict]:
    return [json.loads(row.value) for row in OutboxMessage.objects.filter(topic=topic, key=str(key)).order_by("id")]


def refund_events(txn_id) -> list[str]:
    return [body["event"] for body in outbox(topics.PAYMENT_EVENTS.name, txn_id) if "refund" in body]


@pytest.fixture
def owner(make_caller, seeded, merchant):
    return make_caller(roles=[("OWNER", merchant)], merchants=[merchant]).client()


@pytest.fixture
def pay(client, secret):
    """Settles a transaction as the customer's payment does."""
    return lambda txn: settle(client, txn, secret)


@pytest.fixture
def receiver(settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_the_sale_side_refunds_part_then_the_rest_of_an_order(pay, service_client, merchant, provider):
    txn = paid_order(service_client, pay, merchant)
    lines = [{"lineId": "1", "variantId": "501", "quantity": 1, "restock": True, "locationId": "9001"}]
    first = refund(service_client, txn, merchant, amount=1000, lines=lines)
    assert first.status_code == 201, first.json()
    body = first.json()
    assert body["status"] == "SUCCEEDED" and body["amount"] == 1000 and body["channel"] == "QR"
    assert body["taxAmount"] == 167  # 500 x 1000 / 3000, rounded half even
    assert body["lines"] == [{"lineId": "1", "variantId": "501", "quantity": 1, "restock": True, "locationId": "9001"}]
    assert body["sourceType"] == "ORDER" and body["sourceId"] == txn["sourceId"] and body["financeAccountId"] == "77"
    assert body["requestedBy"] is None and body["providerReference"] and body["succeededAt"]
    stored = PaymentTransaction.objects.get(pk=txn["id"])
    assert (stored.status, stored.refunded_amount, stored.refund_reserved_amount) == ("PARTIALLY_REFUNDED", 1000, 1000)
    assert provider.refunds[Refund.objects.get(pk=body["id"]).code].amount == 100000  # amount x 100

    rest = refund(service_client, txn, merchant, amount=2000)
    assert rest.status_code == 201 and rest.json()["status"] == "SUCCEEDED"
    assert rest.json()["taxAmount"] == 333  # what is left of the tax: refunding everything refunds exactly 500
    stored.refresh_from_db()
    assert (stored.status, stored.refunded_amount) == ("REFUNDED", 3000)
    assert refund_events(txn["id"]) == [
        "refund.created",
        "refund.succeeded",
        "transaction.partially_refunded",
        "refund.created",
        "refund.succeeded",
        "transaction.refunded",
    ]
    shown = service_client.get(f"{BASE}/transactions/{txn['id']}").json()
    assert shown["status"] == "REFUNDED" and shown["refundedAmount"] == 3000

    more = refund(service_client, txn, merchant, amount=1)
    assert more.status_code == 409 and more.json()["code"] == "TRANSACTION_NOT_REFUNDABLE"


def test_payment_refunded_carries_each_succeeded_refund_as_its_contract_says(pay, service_client, merchant):
    txn = paid_order(service_client, pay, merchant)
    lines = [{"lineId": "2", "variantId": "502", "quantity": 1, "restock": False}]
    created = refund(service_client, txn, merchant, amount=1200, taxAmount=200, lines=lines).json()
    [message] = outbox(topics.PAYMENT_REFUNDED.name, txn["id"])
    contracts.check(topics.PAYMENT_REFUNDED.name, json.dumps(message))
    assert message["event"] == "refund.succeeded" and message["refund"]["id"] == created["id"]
    assert message["refund"]["lines"] == [{"lineId": "2", "variantId": "502", "quantity": 1, "restock": False, "locationId": None}]
    assert (message["refund"]["amount"], message["refund"]["taxAmount"]) == (1200, 200)
    assert message["transaction"]["refundedAmount"] == 1200 and message["transaction"]["financeAccountId"] == "77"
    for body in outbox(topics.PAYMENT_EVENTS.name, txn["id"]):
        contracts.check(topics.PAYMENT_EVENTS.name, json.dumps(body))


def test_a_user_refunds_its_merchants_manual_transaction(pay, owner, merchant):
    txn = paid_manual(owner, pay, merchant, amount=2500, taxAmount=None)
    answer = refund(owner, txn, amount=2500)
    assert answer.status_code == 201, answer.json()
    assert answer.json()["status"] == "SUCCEEDED" and answer.json()["taxAmount"] == 0 and answer.json()["requestedBy"]
    assert PaymentTransaction.objects.get(pk=txn["id"]).status == "REFUNDED"


def test_an_idempotency_key_replays_the_first_refund(pay, service_client, merchant, provider):
    txn = paid_order(service_client, pay, merchant)
    first = refund(service_client, txn, merchant, key="return-1")
    again = refund(service_client, txn, merchant, key="return-1")
    assert first.status_code == again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert Refund.objects.filter(transaction_id=txn["id"]).count() == 1 and len(provider.refunds) == 1
    other = refund(service_client, txn, merchant, key="return-1", amount=5)
    assert other.status_code == 422 and other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"


def test_refusals_carry_their_codes_and_write_nothing(pay, service_client, owner, merchant):
    txn = paid_order(service_client, pay, merchant)
    cases = [
        (dict(amount=3001), 409, "REFUND_EXCEEDS_REFUNDABLE"),
        (dict(currency="USD"), 400, "REFUND_CURRENCY_MISMATCH"),
        (dict(lines=[{"lineId": "9", "variantId": "501", "quantity": 1}]), 400, "REFUND_LINE_UNKNOWN"),
        (dict(lines=[{"lineId": "1", "variantId": "999", "quantity": 1}]), 400, "REFUND_LINE_UNKNOWN"),
        (dict(lines=[{"lineId": "1", "variantId": "501", "quantity": 3}]), 400, "REFUND_LINE_QUANTITY_EXCEEDED"),
        (
            dict(lines=[{"lineId": "1", "variantId": "501", "quantity": 1}, {"lineId": "1", "variantId": "501", "quantity": 2}]),
            400,
            "REFUND_LINE_QUANTITY_EXCEEDED",
        ),
        (dict(taxAmount=1001), 400, None),
    ]
    for fields, status_code, code in cases:
        answer = refund(service_client, txn, merchant, **fields)
        assert answer.status_code == status_code, (fields, answer.json())
        assert code is None or answer.json()["code"] == code, answer.json()
    assert refund(service_client, txn, merchant, amount=10**16).json()["code"] == "AMOUNT_TOO_LARGE"
    for body in ({"amount": 10, "currency": "EUR", "reason": ""}, {"amount": 0, "currency": "EUR", "reason": "r"}, {"amount": 1}):
        answer = service_client.post(f"{BASE}/transactions/{txn['id']}/refunds", {**body, "merchantId": str(merchant)}, format="json")
        assert answer.status_code == 400, answer.json()
    assert not Refund.objects.filter(transaction_id=txn["id"]).exists()
    # The user does not refund a sale order behind the sale side's back.
    assert refund(owner, txn).json()["code"] == "TRANSACTION_NOT_REFUNDABLE"
    unpaid = open_transaction(service_client, merchant)
    assert refund(service_client, unpaid, merchant).json()["code"] == "TRANSACTION_NOT_REFUNDABLE"
    # Lines belong to sale orders only.
    manual = paid_manual(owner, pay, merchant)
    answer = refund(owner, manual, lines=[{"lineId": "1", "variantId": "501", "quantity": 1}])
    assert answer.status_code == 400 and [e["field"] for e in answer.json()["errors"]] == ["lines"], answer.json()


def test_lines_are_refunded_at_most_as_many_times_as_they_were_sold(pay, service_client, merchant):
    txn = paid_order(service_client, pay, merchant)
    line = {"lineId": "1", "variantId": "501", "quantity": 1, "restock": True}
    assert refund(service_client, txn, merchant, amount=100, lines=[line]).status_code == 201
    assert refund(service_client, txn, merchant, amount=100, lines=[line]).status_code == 201
    third = refund(service_client, txn, merchant, amount=100, lines=[line])
    assert third.status_code == 400 and third.json()["code"] == "REFUND_LINE_QUANTITY_EXCEEDED" and third.json()["refundableQuantity"] == 0


def test_another_merchants_transaction_is_404(pay, service_client, owner, merchant, make_caller):
    order = paid_order(service_client, pay, merchant)
    manual = paid_manual(owner, pay, merchant)
    other = new_merchant_id()
    stranger = make_caller(roles=[("OWNER", other)], merchants=[other]).client()
    assert refund(stranger, manual).status_code == 404
    assert stranger.get(f"{BASE}/transactions/{manual['id']}/refunds").status_code == 404
    # A platform service names the merchant: another one's transaction does not exist there.
    assert refund(service_client, order, other).status_code == 404
    missing = refund(service_client, order)
    assert missing.status_code == 400 and [e["field"] for e in missing.json()["errors"]] == ["merchantId"]
    made = refund(owner, manual, amount=100).json()
    assert stranger.get(f"{BASE}/refunds/{made['id']}").status_code == 404
    assert stranger.get(f"{BASE}/refunds").json()["results"] == []
    assert stranger.post(f"{BASE}/refunds/{made['id']}/actions/confirm", {}, format="json").status_code == 404
    assert not Refund.objects.filter(transaction_id=order["id"]).exists()


def test_refunds_are_listed_and_filtered(pay, owner, merchant, provider):
    manual = paid_manual(owner, pay, merchant)
    succeeded = refund(owner, manual, amount=100).json()
    provider.refund_mode = "fail"
    failed = refund(owner, manual, amount=200).json()
    assert failed["status"] == "FAILED" and failed["failureReason"] == "refund declined" and failed["failedAt"]
    assert [r["id"] for r in owner.get(f"{BASE}/transactions/{manual['id']}/refunds").json()["results"]] == [failed["id"], succeeded["id"]]
    assert [r["id"] for r in owner.get(f"{BASE}/refunds", {"status": "FAILED"}).json()["results"]] == [failed["id"]]
    listed = owner.get(f"{BASE}/refunds", {"transactionId": manual["id"], "createdAfter": succeeded["createdAt"]}).json()["results"]
    assert {r["id"] for r in listed} == {succeeded["id"], failed["id"]}
    assert owner.get(f"{BASE}/refunds", {"createdBefore": succeeded["createdAt"]}).json()["results"] == []
    assert owner.get(f"{BASE}/refunds/{failed['id']}").json()["status"] == "FAILED"
    assert owner.get(f"{BASE}/refunds", {"status": "LOST"}).status_code == 400
    # A failed refund gives its amount back to what may be refunded.
    txn = PaymentTransaction.objects.get(pk=manual["id"])
    assert (txn.refunded_amount, txn.refund_reserved_amount, txn.status) == (100, 100, "PARTIALLY_REFUNDED")
    assert refund_events(manual["id"])[-2:] == ["refund.created", "refund.failed"]


def test_refund_webhooks_are_delivered_signed(pay, owner, merchant, receiver, provider):
    config = subscribe(owner, merchant, receiver.url, eventTypes=["refund.succeeded", "refund.failed", "transaction.partially_refunded"])
    manual = paid_manual(owner, pay, merchant)
    made = refund(owner, manual, amount=100).json()
    provider.refund_mode = "fail"
    declined = refund(owner, manual, amount=100).json()
    deliveries = deliver_due()
    assert sorted(d.event_type for d in deliveries) == ["refund.failed", "refund.succeeded", "transaction.partially_refunded"]
    assert all(d.status == "SUCCEEDED" for d in deliveries)
    bodies = {(payload := Webhook(config["secret"]).verify(body, headers))["event"]: payload for headers, body in receiver.received}
    assert bodies["refund.succeeded"]["refund"]["id"] == made["id"] and bodies["refund.succeeded"]["transaction"]["refundedAmount"] == 100
    assert bodies["refund.failed"]["refund"]["id"] == declined["id"] and bodies["refund.failed"]["refund"]["status"] == "FAILED"
    bad = owner.post(
        f"{BASE}/webhooks", {"merchantId": str(merchant), "name": "x", "url": receiver.url, "eventTypes": ["refund.lost"]}, format="json"
    )
    assert bad.status_code == 400


def test_the_database_never_holds_more_refunded_than_paid(pay, owner, merchant):
    manual = paid_manual(owner, pay, merchant)
    rows = PaymentTransaction.objects.filter(pk=manual["id"])
    for field, value in (("refund_reserved_amount", 2501), ("refunded_amount", 1), ("refunded_amount", -1)):
        with pytest.raises(IntegrityError), transaction.atomic(using="payment"):
            rows.update(**{field: value})


class TestTheProvidersLaterAnswers:
    @pytest.fixture
    def manual(self, pay, owner, merchant):
        return paid_manual(owner, pay, merchant)

    @pytest.fixture
    def timed_out(self, owner, manual, provider, settings) -> tuple[dict, str]:
        """A refund of 700 whose call timed out, PENDING here, and its code once the provider took it."""
        settings.PAYMENT_PROVIDER_TIMEOUT_SECONDS = 0.2
        provider.refund_delay_seconds = 0.6
        made = refund(owner, manual, amount=700).json()
        assert made["status"] == "PENDING"
        code = Refund.objects.get(pk=made["id"]).code
        wait_for(lambda: code in provider.refunds, message="the provider's refund")
        return made, code

    def test_an_accepted_refund_is_settled_by_the_signed_callback(self, owner, client, manual, provider, secret):
        provider.refund_mode = "async"
        made = refund(owner, manual, amount=500).json()
        assert made["status"] == "PENDING" and made["providerReference"]
        code = Refund.objects.get(pk=made["id"]).code
        fields = provider.refund_callback_fields(provider.refunds[code])
        forged = {**fields, "prov_SecureHash": signed(fields, "not-the-secret")["prov_SecureHash"]}
        assert client.post(REFUND_CALLBACK, json.dumps(forged), content_type="application/json").json()["RspCode"] == "97"
        tampered = {**fields, "prov_Amount": "1"}
        assert client.post(REFUND_CALLBACK, json.dumps(tampered), content_type="application/json").json()["RspCode"] == "97"
        assert Refund.objects.get(pk=made["id"]).status == "PENDING"
        reply = client.post(REFUND_CALLBACK, json.dumps(fields), content_type="application/json").json()
        assert reply == {"RspCode": "00", "Message": "Confirm Success"}
        assert Refund.objects.get(pk=made["id"]).status == "SUCCEEDED"
        again = client.post(REFUND_CALLBACK, json.dumps(fields), content_type="application/json").json()
        assert again["RspCode"] == "00"  # the provider's retry: nothing changes
        assert refund_events(manual["id"]).count("refund.succeeded") == 1
        unknown = signed({"prov_RefundRef": "RF0", "prov_TxnRef": "x", "prov_Amount": "1", "prov_ResponseCode": "00"}, secret)
        assert client.post(REFUND_CALLBACK, json.dumps(unknown), content_type="application/json").json()["RspCode"] == "01"
        assert client.post(REFUND_CALLBACK, "{not json", content_type="application/json").json()["RspCode"] == "99"
        missing = {key: value for key, value in fields.items() if key != "prov_Amount"}
        assert client.post(REFUND_CALLBACK, json.dumps(missing), content_type="application/json").json()["RspCode"] == "99"
        form = client.post(REFUND_CALLBACK, urlencode(fields), content_type="application/x-www-form-urlencoded")
        assert form.json()["RspCode"] == "00"  # form bodies too, as the IPN

    def test_a_pending_refund_holds_its_amount(self, owner, manual, provider):
        provider.refund_mode = "async"
        assert refund(owner, manual, amount=2000).json()["status"] == "PENDING"
        more = refund(owner, manual, amount=1000)
        assert more.status_code == 409 and more.json()["code"] == "REFUND_EXCEEDS_REFUNDABLE"
        assert more.json()["refundableAmount"] == 500
        assert refund(owner, manual, amount=500).status_code == 201

    def test_a_refused_callback_fails_the_refund(self, owner, client, manual, provider):
        provider.refund_mode = "async"
        made = refund(owner, manual, amount=500).json()
        code = Refund.objects.get(pk=made["id"]).code
        fields = provider.refund_callback_fields(provider.refunds[code], response_code="05")
        assert client.post(REFUND_CALLBACK, json.dumps(fields), content_type="application/json").json()["RspCode"] == "00"
        stored = Refund.objects.get(pk=made["id"])
        assert stored.status == "FAILED" and stored.failure_reason == "provider response 05"
        assert PaymentTransaction.objects.get(pk=manual["id"]).refund_reserved_amount == 0

    def test_a_timed_out_refund_stays_pending_while_the_provider_cannot_say(self, manual, provider, timed_out):
        made, code = timed_out
        assert services.refunds_resolve_pending() == 0  # younger than any provider call: maybe in flight
        Refund.objects.filter(pk=made["id"]).update(created_at=timezone.now() - timedelta(minutes=5))
        provider.refunds[code].status = "PENDING"  # the bank is still at it
        asked_before = Refund.objects.get(pk=made["id"]).updated_at
        assert services.refunds_resolve_pending() == 1 and Refund.objects.get(pk=made["id"]).status == "PENDING"
        assert Refund.objects.get(pk=made["id"]).updated_at > asked_before  # to the back of the resolver's line
        provider.stop()  # the provider does not answer: still PENDING, never guessed
        assert services.refunds_resolve_pending() == 1 and Refund.objects.get(pk=made["id"]).status == "PENDING"
        assert PaymentTransaction.objects.get(pk=manual["id"]).refund_reserved_amount == 700

    def test_the_resolver_settles_a_timed_out_refund_the_provider_made(self, manual, provider, timed_out):
        made, code = timed_out
        Refund.objects.filter(pk=made["id"]).update(created_at=timezone.now() - timedelta(minutes=5))
        assert tasks.resolve_unknown_attempts() == 1  # the resolver's task asks about refunds too
        stored = Refund.objects.get(pk=made["id"])
        assert stored.status == "SUCCEEDED" and stored.provider_reference == provider.refunds[code].refund_no
        assert PaymentTransaction.objects.get(pk=manual["id"]).refunded_amount == 700

    def test_a_refund_the_provider_never_got_fails_when_asked(self, manual, provider, timed_out):
        made, code = timed_out
        del provider.refunds[code]
        assert services.refund_resolve(refund_id=int(made["id"])).status == "FAILED"
        assert PaymentTransaction.objects.get(pk=manual["id"]).refund_reserved_amount == 0

    def test_a_refund_the_provider_took_and_then_forgets_stays_pending(self, manual, provider, timed_out):
        """Once the provider answered (the refund is sent), "unknown" contradicts it: the money may
        still go out, so the refund is not failed (and its amount not freed) on that word."""
        made, code = timed_out
        Refund.objects.filter(pk=made["id"]).update(sent_at=timezone.now())
        del provider.refunds[code]
        assert services.refund_resolve(refund_id=int(made["id"])).status == "PENDING"
        assert Refund.objects.get(pk=made["id"]).status == "PENDING"
        assert PaymentTransaction.objects.get(pk=manual["id"]).refund_reserved_amount == 700


def test_a_transaction_paid_in_parts_is_refunded_part_by_part(pay, owner, merchant):
    """A provider refunds one payment: a refund goes back through one successful attempt."""
    txn = open_transaction(owner, merchant, amount=2500, channel="SYSTEM")
    owner.post(f"{BASE}/attempts/{txn['attempts'][0]['id']}/actions/cancel")
    for amount in (1000, 1500):
        attempt = owner.post(f"{BASE}/transactions/{txn['id']}/attempts", {"channel": "SYSTEM", "amount": amount}, format="json").json()
        pay({**txn, "attempts": [attempt]})
    assert PaymentTransaction.objects.get(pk=txn["id"]).status == "SETTLED"
    whole = refund(owner, txn, amount=2500)
    assert whole.status_code == 409 and whole.json()["code"] == "REFUND_EXCEEDS_REFUNDABLE" and whole.json()["largestRefundAmount"] == 1500
    parts = [refund(owner, txn, amount=amount).json() for amount in (1500, 1000)]
    assert [part["attemptId"] for part in parts] == [
        str(a.id) for a in PaymentTransaction.objects.get(pk=txn["id"]).attempts.filter(status="302_SUCCESS").order_by("-amount")
    ]


def test_a_cash_refund_waits_for_the_cashier(pay, owner, merchant, make_caller):
    txn = paid_manual(owner, pay, merchant, channel="SYSTEM")
    made = refund(owner, txn, amount=400).json()
    assert made["status"] == "PENDING" and made["channel"] == "SYSTEM"
    assert services.refunds_resolve_pending(older_than_seconds=0) == 0  # nobody to ask: the cashier confirms
    cashier = make_caller(roles=[("CASHIER", merchant)], merchants=[merchant]).client()
    confirmed = cashier.post(f"{BASE}/refunds/{made['id']}/actions/confirm", {"reference": "till-7"}, format="json")
    assert confirmed.status_code == 200 and confirmed.json()["status"] == "SUCCEEDED" and confirmed.json()["providerReference"] == "till-7"
    twice = cashier.post(f"{BASE}/refunds/{made['id']}/actions/fail", {}, format="json")
    assert twice.status_code == 409 and twice.json()["code"] == "REFUND_INVALID_TRANSITION"
    second = refund(owner, txn, amount=100).json()
    failed = cashier.post(f"{BASE}/refunds/{second['id']}/actions/fail", {"reason": "drawer empty"}, format="json")
    assert failed.json()["status"] == "FAILED" and failed.json()["failureReason"] == "drawer empty"
    assert refund_events(txn["id"])[-1] == "refund.failed"
    qr = paid_manual(owner, pay, merchant)
    provider_refund = refund(owner, qr, amount=100).json()
    manual_confirm = owner.post(f"{BASE}/refunds/{provider_refund['id']}/actions/confirm", {}, format="json")
    assert manual_confirm.status_code == 409 and manual_confirm.json()["code"] == "REFUND_NOT_MANUAL"


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_20_concurrent_refunds_never_give_back_more_than_paid(live_server, merchant, secret, provider, settings):
    """Twenty partial refunds of 300 at once on a transaction paid 2500: exactly 8 fit; the other 12
    are 409 REFUND_EXCEEDS_REFUNDABLE, and the provider refunds each accepted one once."""
    settings.PAYMENT_IPN_BASE_URL = live_server.url
    caller = APIClient()
    caller.credentials(HTTP_AUTHORIZATION=basic_auth_header())
    txn = open_transaction(caller, merchant, lines=[])
    settle(APIClient(), txn, secret)
    barrier = threading.Barrier(20)
    headers = {"Authorization": basic_auth_header()}

    def ask(index):
        barrier.wait()
        body = {"merchantId": str(merchant), "amount": 300, "currency": "EUR", "reason": f"part {index}"}
        key = {"Idempotency-Key": f"part-{index}-{secrets.token_hex(4)}"}
        answer = requests.post(f"{live_server.url}{BASE}/transactions/{txn['id']}/refunds", json=body, headers=headers | key, timeout=60)
        return answer.status_code, answer.json()

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(ask, range(20)))
    connections.close_all()
    assert sorted(code for code, _ in answers) == [201] * 8 + [409] * 12, answers
    assert {body["code"] for code, body in answers if code == 409} == {"REFUND_EXCEEDS_REFUNDABLE"}
    assert {body["status"] for code, body in answers if code == 201} == {"SUCCEEDED"}
    stored = PaymentTransaction.objects.get(pk=txn["id"])
    assert (stored.refunded_amount, stored.refund_reserved_amount, stored.status) == (2400, 2400, "PARTIALLY_REFUNDED")
    assert Refund.objects.filter(transaction_id=txn["id"]).count() == 8
    assert sum(r.amount for r in provider.refunds.values()) == 240000 and len(provider.refunds) == 8
    assert len(outbox(topics.PAYMENT_REFUNDED.name, txn["id"])) == 8


@pytest.fixture
def calling_back(live_server, provider, settings):
    """The fake provider accepting refunds and calling the live server back."""
    settings.PAYMENT_IPN_BASE_URL = live_server.url
    provider.refund_mode = "async"
    return provider


@pytest.fixture
def refunded_offsets(kafka_admin) -> dict:
    """Where payment.refunded ends on the broker before the test."""
    ensure_topics(kafka_admin, [topics.PAYMENT_REFUNDED.name])
    return end_offsets(topics.PAYMENT_REFUNDED.name)


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_the_provider_calls_back_with_an_accepted_refunds_outcome(live_server, merchant, secret, calling_back, refunded_offsets):
    """End to end on the live server: the provider accepts the refund (202), then its own signed
    callback reaches our endpoint, the refund succeeds and payment.refunded reaches the broker."""
    provider = calling_back
    caller = APIClient()
    caller.credentials(HTTP_AUTHORIZATION=basic_auth_header())
    txn = open_transaction(caller, merchant)
    settle(APIClient(), txn, secret)
    body = {"merchantId": str(merchant), "amount": 2500, "currency": "EUR", "reason": "order cancelled"}
    answer = requests.post(
        f"{live_server.url}{BASE}/transactions/{txn['id']}/refunds", json=body, headers={"Authorization": basic_auth_header()}, timeout=30
    )
    assert answer.status_code == 201 and answer.json()["status"] == "PENDING", answer.json()
    code = Refund.objects.get(pk=answer.json()["id"]).code
    provider.complete_refund(code, wait=True)
    connections.close_all()
    assert provider.refunds[code].callback_replies == [(200, "00")]
    assert Refund.objects.get(pk=answer.json()["id"]).status == "SUCCEEDED"
    assert PaymentTransaction.objects.get(pk=txn["id"]).status == "REFUNDED"
    [record] = records_after(refunded_offsets, key=txn["id"], expected=1)
    message = json.loads(record.value)
    assert message["refund"]["id"] == answer.json()["id"] and message["transaction"]["status"] == "REFUNDED"


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_refund_events_reach_the_merchants_payment_room(secret):
    layer = get_channel_layer()
    merchant_id = new_merchant_id()
    add_integration(merchant_id, channel="SYSTEM", secret=secret)
    created = services.transaction_create(merchant_id=merchant_id, source_id="o-ws", amount=100, currency="EUR", channel="SYSTEM")
    services.attempt_send(attempt_id=created.attempt.id)
    fields = signed({"prov_TxnRef": created.attempt.code, "prov_Amount": "10000", "prov_ResponseCode": "00"}, secret)
    assert services.ipn_confirm(channel="SYSTEM", fields=fields) == "00"
    room = f"merchant.{merchant_id}.payment"

    def refund_and_confirm():
        made = services.refund_create(transaction_id=created.transaction.id, amount=100, currency="EUR", reason="r", by_service=True)
        services.refund_send(refund_id=made.id)
        return services.refund_confirm(refund_id=made.id)

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_name(room), channel)
        try:
            made = await sync_to_async(refund_and_confirm)()
            received = []
            while len(received) < 3:  # the settlement's own messages may still be on their way: not these
                message = await asyncio.wait_for(layer.receive(channel), timeout=5)
                if "refund" in message["payload"]:
                    received.append(message)
        finally:
            await layer.group_discard(group_name(room), channel)
        return made, received

    made, received = async_to_sync(scenario)()
    assert [message["event"] for message in received] == [
        "payment.refund.created",
        "payment.refund.succeeded",
        "payment.transaction.refunded",
    ]
    assert received[1]["payload"]["refund"]["id"] == str(made.id) and received[2]["payload"]["transaction"]["refundedAmount"] == 100
