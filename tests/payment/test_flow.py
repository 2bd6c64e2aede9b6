"""End to end through real servers: the sale side opens a QR transaction over HTTP, the fake provider
answers with a QR payload, the customer pays, the provider's IPN reaches our endpoint (its first
call fails and is retried on schedule), the transaction settles, `payment.success` and the event
stream reach Kafka, and the merchant's webhook is delivered and verified by `standardwebhooks`.
Plus the schedulers: QR expiry and the resolution of UNKNOWN attempts by asking the provider."""

from __future__ import annotations

import contextlib
import json
import time

import pytest
import requests
from django.db import connections
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from standardwebhooks.webhooks import Webhook

from apps.payment import services
from apps.payment.connectors import UNKNOWN, HttpConnector, ProviderAnswer
from apps.payment.models import OutboxMessage, PaymentAttempt, PaymentTransaction
from merchant_platform.messaging import topics
from merchant_platform.verification.service_accounts import basic_auth_header
from tests.payment.conftest import BASE, open_transaction
from tests.payment.test_webhooks import Receiver
from tests.support.broker import BROKER
from tests.support.waiting import patience, wait_for

pytestmark = pytest.mark.django_db(databases="__all__")


def ensure_topics(admin, names):
    existing = set(admin.list_topics())
    for name in names:
        if name not in existing:
            with contextlib.suppress(Exception):
                admin.create_topics([NewTopic(name, 6, 1)])


def end_offsets(topic: str) -> dict:
    reader = KafkaConsumer(bootstrap_servers=BROKER, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in wait_for(lambda: reader.partitions_for_topic(topic), message=topic)]
        return reader.end_offsets(partitions)
    finally:
        reader.close()


def records_after(offsets: dict, *, key: str, expected: int, timeout: float = 20.0) -> list:
    reader = KafkaConsumer(bootstrap_servers=BROKER, enable_auto_commit=False, consumer_timeout_ms=500)
    try:
        reader.assign(list(offsets))
        for partition, offset in offsets.items():
            reader.seek(partition, offset)
        found: list = []
        deadline = time.monotonic() + patience(timeout)
        while len(found) < expected and time.monotonic() < deadline:
            for batch in reader.poll(timeout_ms=300).values():
                found += [record for record in batch if record.key == key.encode()]
        return found
    finally:
        reader.close()


@pytest.fixture
def live(live_server, settings, kafka_admin):
    """The live server as the providers' IPN target, private webhook URLs allowed, topics present."""
    settings.PAYMENT_IPN_BASE_URL = live_server.url
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
    ensure_topics(kafka_admin, [topics.PAYMENT_SUCCESS.name, topics.PAYMENT_EVENTS.name])
    return live_server, settings


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_the_qr_flow_end_to_end(live, make_caller, seeded, merchant, provider):
    live_server, settings = live
    success_offsets, events_offsets = end_offsets(topics.PAYMENT_SUCCESS.name), end_offsets(topics.PAYMENT_EVENTS.name)
    receiver = Receiver()
    caller = make_caller(roles=["ADMIN"])
    headers = {"Authorization": f"Bearer {caller.token}"}
    hook = requests.post(
        f"{live_server.url}{BASE}/webhooks",
        json={"merchantId": str(merchant), "name": "sale", "url": receiver.url, "eventTypes": ["transaction.settled"]},
        headers=headers,
        timeout=10,
    ).json()

    response = requests.post(
        f"{live_server.url}{BASE}/transactions",
        json={
            "merchantId": str(merchant),
            "sourceId": "order-e2e",
            "amount": 4200,
            "currency": "EUR",
            "financeAccountId": "9001",
            "lines": [{"variantId": "5", "quantity": 1}],
        },
        headers={"Authorization": basic_auth_header()},  # the sale side opens an ORDER
        timeout=10,
    )
    assert response.status_code == 201, response.text
    txn = response.json()
    attempt = txn["attempts"][0]
    assert attempt["status"] == "SENT" and attempt["qrPayload"]

    settings.PAYMENT_IPN_MAX_BODY_BYTES = 10  # the first IPN is refused (413): the provider retries
    provider.pay(attempt["code"])
    payment = provider.payments[attempt["code"]]
    wait_for(lambda: payment.ipn_replies, message="the first IPN")
    settings.PAYMENT_IPN_MAX_BODY_BYTES = 8192
    wait_for(lambda: payment.ipn_replies[-1][1] == "00", message="a confirmed IPN")
    assert payment.ipn_replies[0][0] == 413 and len(payment.ipn_replies) >= 2

    connections.close_all()
    assert PaymentTransaction.objects.get(pk=txn["id"]).status == "SETTLED"
    assert PaymentAttempt.objects.get(pk=attempt["id"]).status == "302_SUCCESS"

    [success] = records_after(success_offsets, key="order-e2e", expected=1)
    body = json.loads(success.value)
    assert body["transaction"]["sourceId"] == "order-e2e" and body["attempt"]["financeAccountId"] == "9001"
    assert body["order"]["lines"] == [{"lineId": "1", "variantId": "5", "quantity": 1}]
    stream = records_after(events_offsets, key=txn["id"], expected=5)
    assert [json.loads(r.value)["event"] for r in stream] == [
        "transaction.created",
        "attempt.created",
        "attempt.sent",
        "attempt.success",
        "transaction.settled",
    ]
    assert OutboxMessage.objects.filter(key=txn["id"], sent_at__isnull=True).count() == 0

    for delivery_id in services.webhook_deliveries_due():
        services.webhook_deliver(delivery_id=delivery_id)
    [(hook_headers, hook_body)] = receiver.received
    assert Webhook(hook["secret"]).verify(hook_body, hook_headers)["event"] == "transaction.settled"
    receiver.server.shutdown()
    receiver.server.server_close()


def test_a_qr_attempt_past_its_expiry_expires(admin, merchant):
    body = open_transaction(admin, merchant)
    attempt_id = body["attempts"][0]["id"]
    assert services.attempts_expire() == 0
    PaymentAttempt.objects.filter(pk=attempt_id).update(expires_at="2000-01-01T00:00:00Z")
    assert services.attempts_expire() == 1
    assert PaymentAttempt.objects.get(pk=attempt_id).status == "EXPIRED"
    assert OutboxMessage.objects.filter(key=body["id"], headers__eventType="attempt.expired").count() == 1
    assert services.attempts_expire() == 0
    assert PaymentTransaction.objects.get(pk=body["id"]).status == "NEW"  # the sale may try again


def test_a_timed_out_provider_call_is_unknown_until_the_provider_answers(admin, merchant, provider, settings):
    settings.PAYMENT_PROVIDER_TIMEOUT_SECONDS = 0.2
    provider.create_delay_seconds = 0.6
    body = open_transaction(admin, merchant)
    attempt = body["attempts"][0]
    assert attempt["status"] == "UNKNOWN"
    refused = admin.post(f"{BASE}/transactions/{body['id']}/actions/cancel")
    assert refused.status_code == 409 and refused.json()["code"] == "ATTEMPT_UNRESOLVED"
    # The provider did take it, late: the resolver asks and records what it says, never guesses.
    wait_for(lambda: attempt["code"] in provider.payments, message="the provider's record")
    provider.payments[attempt["code"]].status = "PAID"
    provider.payments[attempt["code"]].pay_date = "20261125120000"
    assert services.attempts_resolve_unknown() == 1
    assert PaymentAttempt.objects.get(pk=attempt["id"]).status == "302_SUCCESS"
    assert PaymentTransaction.objects.get(pk=body["id"]).status == "SETTLED"


def test_an_unknown_attempt_stays_unknown_while_the_provider_cannot_say(admin, merchant, provider, settings):
    settings.PAYMENT_PROVIDER_TIMEOUT_SECONDS = 0.2
    provider.create_delay_seconds = 0.6
    attempt = open_transaction(admin, merchant)["attempts"][0]
    provider.stop()
    assert services.attempt_resolve(attempt_id=int(attempt["id"])).status == "UNKNOWN"


def test_an_unknown_attempt_the_provider_never_got_fails(admin, merchant, provider, settings):
    settings.PAYMENT_PROVIDER_TIMEOUT_SECONDS = 0.2
    provider.create_delay_seconds = 0.6
    attempt = open_transaction(admin, merchant)["attempts"][0]
    wait_for(lambda: attempt["code"] in provider.payments, message="the provider's record")
    del provider.payments[attempt["code"]]
    assert services.attempt_resolve(attempt_id=int(attempt["id"])).status == "FAILED"


def test_an_unreachable_provider_fails_the_attempt(admin, merchant, provider):
    provider.stop()  # nothing listens: the request never left, so the attempt fails outright
    attempt = open_transaction(admin, merchant)["attempts"][0]
    assert attempt["status"] == "FAILED" and attempt["failureReason"] == "provider unreachable"


@pytest.mark.parametrize(("channel", "calls"), [("QR", 6), ("PHONE_POS", 4), ("SMART_POS", 4)])
def test_the_fake_provider_retries_an_unanswered_ipn_on_the_spec_schedule(channel, calls):
    from apps.payment.fake_provider import INTERVALS, FakePayment, FakeProvider

    assert INTERVALS == {"QR": 300.0, "PHONE_POS": 120.0, "SMART_POS": 120.0, "SYSTEM": 0.0}  # spec 8, in seconds
    receiver = Receiver()
    receiver.plan = [500] * 10
    fake = FakeProvider(secret="s", retry_interval_seconds=0.01)
    try:
        fake.payments["PA1"] = FakePayment(
            txn_ref="PA1", amount=100, currency="EUR", channel=channel, ipn_url=receiver.url, transaction_no="1"
        )
        fake.pay("PA1", wait=True)
        assert len(receiver.received) == calls  # the first call and its retries
        assert [reply[0] for reply in fake.payments["PA1"].ipn_replies] == [500] * calls
    finally:
        fake.stop()
        receiver.server.shutdown()
        receiver.server.server_close()


def test_an_attempt_its_process_never_sent_is_sent_by_the_scheduler(merchant):
    created = services.transaction_create(merchant_id=merchant, source_id="o-died", amount=100, currency="EUR")  # no send: the process died
    assert services.attempts_resolve_unknown() == 0  # a fresh CREATED attempt may be in flight
    PaymentAttempt.objects.filter(pk=created.attempt.id).update(created_at="2000-01-01T00:00:00Z")
    assert services.attempts_resolve_unknown() == 1
    assert PaymentAttempt.objects.get(pk=created.attempt.id).status == "SENT"


@pytest.mark.parametrize("body", [b"[1, 2]", b'"paid"', b"null", b"<html>busy</html>"])
def test_a_provider_answer_that_is_not_a_json_object_is_unknown(body):
    """The provider may have acted: an answer that is not a JSON object is UNKNOWN, never a crash."""
    response = requests.Response()
    response.status_code, response._content = 200, body
    answer = HttpConnector._read(response)
    assert isinstance(answer, ProviderAnswer) and answer.status == UNKNOWN
