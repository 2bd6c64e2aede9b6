"""The IPN endpoints (spec 2.3, 4.9, 5): signatures computed here, independently of the service; the
reply codes; confirmation idempotent and serialised (20 concurrent deliveries confirm once)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

import pytest
import requests
from django.db import connections

from apps.payment.models import OutboxMessage, PaymentAttempt, PaymentTransaction
from merchant_platform.messaging import topics
from tests.payment.conftest import IPN_PATHS, ipn_fields, open_transaction, signed
from tests.support.waiting import patience

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture
def opened(admin, merchant) -> dict:
    return open_transaction(admin, merchant)


def post_ipn(client, channel: str, fields: dict, *, form: bool = False):
    path = IPN_PATHS[channel]
    response = (
        client.post(path, urlencode(fields), content_type="application/x-www-form-urlencoded")
        if form
        else client.post(path, json.dumps(fields), content_type="application/json")
    )
    assert response.status_code == 200
    return response.json()


def outbox_events(transaction_id) -> list[str]:
    return [
        row.headers["eventType"]
        for row in OutboxMessage.objects.filter(topic=topics.PAYMENT_EVENTS.name, key=str(transaction_id)).order_by("id")
    ]


def test_a_valid_ipn_confirms_and_settles(client, service_client, merchant, secret):
    body = open_transaction(service_client, merchant, lines=[{"variantId": "77", "quantity": 3}], financeAccountId="555")
    attempt = body["attempts"][0]
    assert post_ipn(client, "QR", signed(ipn_fields(attempt), secret)) == {"RspCode": "00", "Message": "Confirm Success"}
    txn = PaymentTransaction.objects.get(pk=body["id"])
    assert txn.status == "SETTLED" and txn.paid_amount == 2500
    stored = PaymentAttempt.objects.get(pk=attempt["id"])
    assert stored.status == "302_SUCCESS" and stored.provider_reference == "14009999" and stored.bank_code == "NCB"
    assert stored.paid_at.strftime("%Y%m%d%H%M%S") == "20261125133000"
    assert outbox_events(body["id"])[-2:] == ["attempt.success", "transaction.settled"]
    [success] = OutboxMessage.objects.filter(topic=topics.PAYMENT_SUCCESS.name, key=body["sourceId"])
    value = json.loads(success.value)
    assert value["event"] == "attempt.success" and value["transaction"]["sourceId"] == body["sourceId"]
    assert value["transaction"]["status"] == "SETTLED"
    assert value["order"] == {
        "merchantId": str(merchant),
        "transactionId": body["id"],
        "sourceType": "ORDER",
        "lines": [{"lineId": "1", "variantId": "77", "quantity": 3}],
    }
    attempt_body = value["attempt"]
    assert attempt_body["financeAccountId"] == "555" and attempt_body["amount"] == 2500 and attempt_body["currency"] == "EUR"
    assert attempt_body["id"] == attempt["id"] and attempt_body["status"] == "302_SUCCESS"
    # The provider retries: the same IPN answers success again and changes nothing.
    assert post_ipn(client, "QR", signed(ipn_fields(attempt), secret))["RspCode"] == "00"
    assert outbox_events(body["id"]).count("attempt.success") == 1
    assert OutboxMessage.objects.filter(topic=topics.PAYMENT_SUCCESS.name, key=body["sourceId"]).count() == 1


def test_a_form_body_is_accepted_on_every_channel(client, admin, merchant, secret):
    for channel in ("PHONE_POS", "SMART_POS", "SYSTEM"):
        body = open_transaction(admin, merchant, channel=channel)
        attempt = body["attempts"][0]
        assert attempt["status"] == "SENT", attempt
        assert post_ipn(client, channel, signed(ipn_fields(attempt), secret), form=True)["RspCode"] == "00"
        assert PaymentTransaction.objects.get(pk=body["id"]).status == "SETTLED"


def test_an_ipn_on_another_channels_path_finds_no_attempt(client, admin, merchant, secret):
    attempt = open_transaction(admin, merchant)["attempts"][0]
    assert post_ipn(client, "SYSTEM", signed(ipn_fields(attempt), secret))["RspCode"] == "01"


def test_a_failed_payment_fails_the_attempt(client, admin, merchant, secret):
    body = open_transaction(admin, merchant)
    attempt = body["attempts"][0]
    assert post_ipn(client, "QR", signed(ipn_fields(attempt, code="24"), secret))["RspCode"] == "00"
    assert PaymentAttempt.objects.get(pk=attempt["id"]).status == "FAILED"
    assert PaymentTransaction.objects.get(pk=body["id"]).status == "NEW"
    assert outbox_events(body["id"])[-1] == "attempt.failed"
    # A success after the failure is not taken silently.
    assert post_ipn(client, "QR", signed(ipn_fields(attempt), secret))["RspCode"] == "02"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("bad_signature", "97"),
        ("lower_case_signature", "97"),
        ("tampered_amount", "97"),
        ("wrong_amount", "04"),
        ("non_numeric_amount", "04"),
        ("unknown_ref", "01"),
        ("missing_ref", "99"),
        ("missing_hash", "99"),
        ("bad_date", "99"),
        ("nested_value", "99"),
    ],
)
def test_bad_ipns_answer_the_providers_codes_and_change_nothing(client, opened, secret, change, expected):
    body = opened
    attempt = body["attempts"][0]
    fields = signed(ipn_fields(attempt), secret)
    if change == "bad_signature":
        fields = signed(ipn_fields(attempt), "not-the-secret")
    elif change == "lower_case_signature":
        fields["prov_SecureHash"] = fields["prov_SecureHash"].lower()
    elif change == "tampered_amount":
        fields["prov_Amount"] = "100"
    elif change == "wrong_amount":
        fields = signed(ipn_fields(attempt, amount=100), secret)
    elif change == "non_numeric_amount":
        fields = signed({**ipn_fields(attempt), "prov_Amount": "12a"}, secret)
    elif change == "unknown_ref":
        fields = signed({**ipn_fields(attempt), "prov_TxnRef": "PA" + "0" * 32}, secret)
    elif change == "missing_ref":
        fields.pop("prov_TxnRef")
    elif change == "missing_hash":
        fields.pop("prov_SecureHash")
    elif change == "bad_date":
        fields = signed({**ipn_fields(attempt), "prov_PayDate": "20261399999999"}, secret)
    elif change == "nested_value":
        fields["prov_BankCode"] = {"x": 1}
    assert post_ipn(client, "QR", fields)["RspCode"] == expected
    assert PaymentAttempt.objects.get(pk=attempt["id"]).status == "SENT"
    assert PaymentTransaction.objects.get(pk=body["id"]).status == "NEW"


def test_a_body_that_is_not_json_answers_99(client):
    response = client.post(IPN_PATHS["QR"], "{not json", content_type="application/json")
    assert response.status_code == 200 and response.json()["RspCode"] == "99"
    response = client.post(IPN_PATHS["QR"], "[1, 2]", content_type="application/json")
    assert response.status_code == 200 and response.json()["RspCode"] == "99"


def test_an_invalid_signature_is_logged_without_the_secret(client, admin, merchant, secret, caplog):
    attempt = open_transaction(admin, merchant)["attempts"][0]
    fields = signed(ipn_fields(attempt), "wrong")
    assert post_ipn(client, "QR", fields)["RspCode"] == "97"
    logged = " ".join(str(record.msg) for record in caplog.records)
    assert "payment.ipn.bad_signature" in logged
    assert secret not in logged and fields["prov_SecureHash"] not in logged


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_the_same_ipn_delivered_20_times_at_once_confirms_once(live_server, make_caller, seeded, merchant, secret):
    admin = make_caller(roles=["ADMIN"]).client()
    body = open_transaction(admin, merchant)
    fields = signed(ipn_fields(body["attempts"][0]), secret)
    barrier = threading.Barrier(20)

    def deliver(_):
        barrier.wait()
        # As a provider does: a 503 DATABASE_UNAVAILABLE (a connection a stalled machine could not
        # open in time) wrote nothing and is delivered again.
        deadline = time.monotonic() + patience(20)
        while (answer := requests.post(f"{live_server.url}{IPN_PATHS['QR']}", json=fields, timeout=30)).status_code == 503:
            assert answer.json()["code"] == "DATABASE_UNAVAILABLE" and time.monotonic() < deadline, answer.content
            time.sleep(0.2)
        return answer.json()["RspCode"]

    with ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(deliver, range(20)))
    connections.close_all()
    assert codes == ["00"] * 20
    events = outbox_events(body["id"])
    assert events.count("attempt.success") == 1 and events.count("transaction.settled") == 1
    assert OutboxMessage.objects.filter(topic=topics.PAYMENT_SUCCESS.name, key=body["sourceId"]).count() == 1
    assert PaymentTransaction.objects.get(pk=body["id"]).paid_amount == 2500
