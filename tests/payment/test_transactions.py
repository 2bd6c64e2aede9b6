"""Transactions and attempts over HTTP: creation through the fake provider, sourceId idempotency,
the state machine (409 on illegal transitions), cancellation, tenant isolation."""

from __future__ import annotations

import socket

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.payment import services
from apps.payment.models import OutboxMessage, PaymentAttempt, PaymentTransaction
from merchant_platform.messaging import topics
from merchant_platform.money import MAX_AMOUNT, MAX_QUANTITY
from tests.payment.conftest import BASE, add_integration, new_merchant_id, open_transaction
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(databases="__all__")


def events_of(transaction_id) -> list[str]:
    return [
        row.headers["eventType"]
        for row in OutboxMessage.objects.filter(topic=topics.PAYMENT_EVENTS.name, key=str(transaction_id)).order_by("id")
    ]


def test_every_route_requires_authentication(client):
    for method, path in [("get", f"{BASE}/transactions"), ("post", f"{BASE}/transactions"), ("get", f"{BASE}/attempts")]:
        response = getattr(client, method)(path)
        assert response.status_code == 401, path
        assert response["Content-Type"] == "application/problem+json"


def test_creating_a_transaction_sends_its_first_attempt_to_the_provider(service_client, merchant, provider):
    body = open_transaction(service_client, merchant, financeAccountId="123", lines=[{"variantId": "42", "quantity": 2}])
    assert body["sourceType"] == "ORDER"  # the sale side's service credentials
    assert body["status"] == "NEW" and body["amount"] == 2500 and body["paidAmount"] == 0
    assert body["financeAccountId"] == "123" and body["lines"] == [{"lineId": "1", "variantId": "42", "quantity": 2}]
    [attempt] = body["attempts"]
    assert attempt["status"] == "SENT" and attempt["channel"] == "QR" and attempt["amount"] == 2500
    assert attempt["qrPayload"] and attempt["providerReference"] and attempt["expiresAt"]
    assert len(attempt["code"]) >= 32 and attempt["code"] in provider.payments
    assert provider.payments[attempt["code"]].amount == 250000  # amount x 100
    assert events_of(body["id"]) == ["transaction.created", "attempt.created", "attempt.sent"]


def test_the_same_source_id_returns_the_existing_transaction(admin, merchant):
    first = open_transaction(admin, merchant, sourceId="order-1")
    again = admin.post(
        f"{BASE}/transactions", {"merchantId": str(merchant), "sourceId": "order-1", "amount": 2500, "currency": "EUR"}, format="json"
    )
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert PaymentTransaction.objects.filter(merchant_id=merchant, source_id="order-1").count() == 1
    assert PaymentAttempt.objects.filter(transaction_id=first["id"]).count() == 1
    other = admin.post(
        f"{BASE}/transactions", {"merchantId": str(merchant), "sourceId": "order-1", "amount": 999, "currency": "EUR"}, format="json"
    )
    assert other.status_code == 409 and other.json()["code"] == "SOURCE_ID_CONFLICT"


def test_a_missing_integration_fails_the_attempt(admin):
    body = open_transaction(admin, new_merchant_id())
    [attempt] = body["attempts"]
    assert attempt["status"] == "FAILED" and attempt["failureReason"] == "integration not found"
    assert events_of(body["id"])[-1] == "attempt.failed"


def test_a_wrong_application_secret_fails_the_attempt_with_decrypt_failed(admin, merchant, settings):
    settings.APP_ENV_APPLICATION_SECRET = "another-secret-" + "x" * 32
    [attempt] = open_transaction(admin, merchant)["attempts"]
    assert attempt["status"] == "FAILED" and attempt["failureReason"] == "decrypt failed"


def test_cancelling_cancels_open_attempts_then_the_transaction(admin, merchant):
    body = open_transaction(admin, merchant)
    response = admin.post(f"{BASE}/transactions/{body['id']}/actions/cancel")
    assert response.status_code == 200 and response.json()["status"] == "CANCELLED"
    assert [a["status"] for a in response.json()["attempts"]] == ["CANCELLED"]
    assert events_of(body["id"])[-2:] == ["attempt.cancelled", "transaction.cancelled"]
    again = admin.post(f"{BASE}/transactions/{body['id']}/actions/cancel")
    assert again.status_code == 409 and again.json()["code"] == "TRANSACTION_INVALID_TRANSITION"
    assert again.json()["transactionStatus"] == "CANCELLED"
    more = admin.post(f"{BASE}/transactions/{body['id']}/attempts", {"channel": "QR"}, format="json")
    assert more.status_code == 409 and more.json()["code"] == "TRANSACTION_INVALID_TRANSITION"


def test_a_new_attempt_needs_the_open_one_closed(admin, merchant):
    body = open_transaction(admin, merchant)
    refused = admin.post(f"{BASE}/transactions/{body['id']}/attempts", {"channel": "SYSTEM"}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "ATTEMPT_OPEN"
    attempt_id = body["attempts"][0]["id"]
    assert admin.post(f"{BASE}/attempts/{attempt_id}/actions/cancel").json()["status"] == "CANCELLED"
    twice = admin.post(f"{BASE}/attempts/{attempt_id}/actions/cancel")
    assert twice.status_code == 409 and twice.json()["code"] == "ATTEMPT_INVALID_TRANSITION"
    created = admin.post(f"{BASE}/transactions/{body['id']}/attempts", {"channel": "SYSTEM", "amount": 1000}, format="json")
    assert created.status_code == 201 and created.json()["status"] == "SENT" and created.json()["amount"] == 1000
    too_much = admin.post(f"{BASE}/transactions/{body['id']}/attempts", {"channel": "SYSTEM", "amount": 99999}, format="json")
    assert too_much.status_code in (400, 409)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"merchantId": "1", "sourceId": "o", "amount": 0, "currency": "EUR"},
        {"merchantId": "1", "sourceId": "o", "amount": 10, "currency": "eur"},
        {"merchantId": "1", "sourceId": "o", "amount": "10", "currency": "EUR", "channel": "CASH"},
        {"merchantId": "x", "sourceId": "o", "amount": 10, "currency": "EUR"},
        {"merchantId": "1", "sourceId": "o", "amount": 10, "currency": "EUR", "lines": [{"variantId": "1", "quantity": 0}]},
        {"merchantId": "1", "sourceId": "o", "amount": 10, "currency": "EUR", "status": "SETTLED"},
        {"merchantId": "1", "sourceId": "order 1", "amount": 10, "currency": "EUR"},
        {"merchantId": "1", "sourceId": 12, "amount": 10, "currency": "EUR"},
        {
            "merchantId": "1",
            "sourceId": "o",
            "amount": 10,
            "currency": "EUR",
            "lines": [{"lineId": "a", "variantId": "1", "quantity": 1}, {"lineId": "a", "variantId": "2", "quantity": 1}],
        },
    ],
)
def test_malformed_creation_is_a_400_problem(admin, body):
    response = admin.post(f"{BASE}/transactions", body, format="json")
    assert response.status_code == 400, response.json()
    assert response["Content-Type"] == "application/problem+json"


def test_another_merchants_transaction_answers_404(make_caller, seeded, admin, merchant):
    body = open_transaction(admin, merchant)
    other = new_merchant_id()
    stranger = make_caller(roles=[("OWNER", other)], merchants=[other]).client()
    assert stranger.get(f"{BASE}/transactions/{body['id']}").status_code == 404
    assert stranger.post(f"{BASE}/transactions/{body['id']}/actions/cancel").status_code == 404
    assert stranger.get(f"{BASE}/transactions").json()["results"] == []
    creating = stranger.post(
        f"{BASE}/transactions", {"merchantId": str(merchant), "sourceId": "x", "amount": 1, "currency": "EUR"}, format="json"
    )
    assert creating.status_code == 403
    owner = make_caller(roles=[("OWNER", merchant)], merchants=[merchant]).client()
    assert owner.get(f"{BASE}/transactions/{body['id']}").status_code == 200


def test_an_idempotency_key_replays_the_first_answer(admin, merchant):
    body = {"merchantId": str(merchant), "sourceId": "order-idem", "amount": 2500, "currency": "EUR"}
    first = admin.post(f"{BASE}/transactions", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = admin.post(f"{BASE}/transactions", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201  # the replay, not sourceId's 200
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    other = admin.post(f"{BASE}/transactions", {**body, "amount": 10}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422 and other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert PaymentTransaction.objects.filter(source_id="order-idem").count() == 1


def test_a_failed_first_request_frees_its_idempotency_key(admin, merchant):
    from apps.payment.models import IdempotencyKey

    body = {"merchantId": str(merchant), "sourceId": "order-busy", "amount": 2500, "currency": "EUR"}
    open_transaction(admin, merchant, sourceId="order-x", amount=100)
    failed = admin.post(f"{BASE}/transactions", {**body, "sourceId": "order-x"}, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert failed.status_code == 409 and failed.json()["code"] == "SOURCE_ID_CONFLICT"
    assert not IdempotencyKey.objects.filter(key="k-2").exists()  # the client may retry with the key


def test_a_running_first_request_answers_409(admin, merchant, make_caller):
    import hashlib
    import json

    from apps.payment.models import IdempotencyKey

    body = {"merchantId": str(merchant), "sourceId": "order-run", "amount": 2500, "currency": "EUR"}
    caller = make_caller(roles=["ADMIN"])
    fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    IdempotencyKey.objects.create(
        caller=f"user:{caller.user_id}",
        operation=f"transactions.create:{merchant}",
        key="run",
        request_hash=fingerprint,
        started_at=timezone.now(),
    )
    response = caller.client().post(f"{BASE}/transactions", body, format="json", HTTP_IDEMPOTENCY_KEY="run")
    assert response.status_code == 409 and response.json()["code"] == "IDEMPOTENCY_KEY_IN_PROGRESS"


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_concurrent_creations_with_one_source_id_make_one_transaction(live_server, make_caller, seeded, merchant):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import requests
    from django.db import connections

    headers = {"Authorization": f"Bearer {make_caller(roles=['ADMIN']).token}"}
    body = {"merchantId": str(merchant), "sourceId": "order-race", "amount": 2500, "currency": "EUR", "channel": "SYSTEM"}
    barrier = threading.Barrier(10)

    def create(_):
        barrier.wait()
        response = requests.post(f"{live_server.url}{BASE}/transactions", json=body, headers=headers, timeout=30)
        return response.status_code, response.json()["id"]

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(create, range(10)))
    connections.close_all()
    assert sorted(code for code, _ in answers).count(201) == 1 and {code for code, _ in answers} <= {200, 201}
    assert len({transaction_id for _, transaction_id in answers}) == 1
    assert PaymentTransaction.objects.filter(merchant_id=merchant, source_id="order-race").count() == 1
    assert PaymentAttempt.objects.filter(merchant_id=merchant).count() == 1


def test_a_provider_endpoint_on_a_private_address_is_never_connected_to(admin, settings, secret):
    """A merchant's integration endpoint goes through the outbound guard: the attempt fails unsent,
    the resolver leaves an UNKNOWN attempt UNKNOWN, and no TCP connection reaches the listener."""
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = False
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        merchant = new_merchant_id()
        add_integration(merchant, channel="QR", secret=secret, endpoint=f"http://127.0.0.1:{listener.getsockname()[1]}")
        add_integration(merchant, channel="PHONE_POS", secret=secret, endpoint="http://[::ffff:127.0.0.1]:9")
        for channel in ("QR", "PHONE_POS"):
            [attempt] = open_transaction(admin, merchant, channel=channel)["attempts"]
            assert attempt["status"] == "FAILED" and attempt["failureReason"].startswith("provider endpoint refused"), attempt
        PaymentAttempt.objects.filter(merchant_id=merchant, channel="QR").update(status="UNKNOWN")
        unknown = PaymentAttempt.objects.get(merchant_id=merchant, channel="QR")
        assert services.attempt_resolve(attempt_id=unknown.id).status == "UNKNOWN"
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected


def test_a_users_transaction_is_manual_and_never_an_order(admin, service_client, merchant, make_caller):
    """Only the sale side (service credentials) opens ORDER transactions, the ones consumers match
    orders on; a user's is MANUAL, without lines, and its sourceId is de-duplicated apart."""
    order = open_transaction(service_client, merchant, sourceId="SO-77", lines=[{"variantId": "42", "quantity": 1}])
    manual = open_transaction(admin, merchant, sourceId="SO-77", amount=999)  # no SOURCE_ID_CONFLICT with the order
    assert (order["sourceType"], manual["sourceType"]) == ("ORDER", "MANUAL") and manual["id"] != order["id"]
    again = admin.post(
        f"{BASE}/transactions", {"merchantId": str(merchant), "sourceId": "SO-77", "amount": 999, "currency": "EUR"}, format="json"
    )
    assert again.status_code == 200 and again.json()["id"] == manual["id"]
    with_lines = admin.post(
        f"{BASE}/transactions",
        {"merchantId": str(merchant), "sourceId": "SO-78", "amount": 5, "currency": "EUR", "lines": [{"variantId": "42", "quantity": 1}]},
        format="json",
    )
    assert with_lines.status_code == 400 and [e["field"] for e in with_lines.json()["errors"]] == ["lines"], with_lines.json()
    other = new_merchant_id()
    cashier = make_caller(roles=[("CASHIER", other)], merchants=[other]).client()
    theirs = open_transaction(cashier, other, sourceId="SO-77")  # another merchant naming this one's order id
    assert theirs["merchantId"] == str(other) and theirs["sourceType"] == "MANUAL"
    assert PaymentTransaction.objects.get(pk=order["id"]).amount == 2500


def test_an_idempotency_key_is_scoped_to_the_merchant(admin):
    first, second = new_merchant_id(), new_merchant_id()
    answers = [
        admin.post(
            f"{BASE}/transactions",
            {"merchantId": str(merchant), "sourceId": "o-1", "amount": 100, "currency": "EUR", "channel": "SYSTEM"},
            format="json",
            HTTP_IDEMPOTENCY_KEY="key-1",
        )
        for merchant in (first, second)
    ]
    assert [answer.status_code for answer in answers] == [201, 201], [answer.json() for answer in answers]
    assert [answer.json()["merchantId"] for answer in answers] == [str(first), str(second)]


def test_amounts_over_the_platform_limit_are_400_amount_too_large(admin, service_client, merchant):
    body = {"merchantId": str(merchant), "currency": "EUR", "channel": "SYSTEM"}
    for amount in (MAX_AMOUNT + 1, 2**70):
        refused = admin.post(f"{BASE}/transactions", {**body, "sourceId": f"big-{amount}", "amount": amount}, format="json")
        assert refused.status_code == 400 and refused.json()["code"] == "AMOUNT_TOO_LARGE", refused.json()
    largest = open_transaction(admin, merchant, amount=MAX_AMOUNT, channel="SYSTEM")
    assert largest["amount"] == MAX_AMOUNT
    admin.post(f"{BASE}/transactions/{largest['id']}/actions/cancel")
    txn = open_transaction(admin, merchant, channel="SYSTEM")
    admin.post(f"{BASE}/attempts/{txn['attempts'][0]['id']}/actions/cancel")
    more = admin.post(f"{BASE}/transactions/{txn['id']}/attempts", {"channel": "SYSTEM", "amount": 2**70}, format="json")
    assert more.status_code == 400 and more.json()["code"] == "AMOUNT_TOO_LARGE", more.json()
    too_many = service_client.post(
        f"{BASE}/transactions",
        {**body, "sourceId": "qty", "amount": 5, "lines": [{"variantId": "42", "quantity": MAX_QUANTITY + 1}]},
        format="json",
    )
    assert too_many.status_code == 400 and [e["field"] for e in too_many.json()["errors"]] == ["lines.0.quantity"], too_many.json()


def test_the_tables_hold_the_amount_limit(admin, merchant):
    txn = open_transaction(admin, merchant, channel="SYSTEM")
    for rows, field in (
        (PaymentTransaction.objects.filter(pk=txn["id"]), "amount"),
        (PaymentTransaction.objects.filter(pk=txn["id"]), "paid_amount"),
        (PaymentAttempt.objects.filter(transaction_id=txn["id"]), "amount"),
    ):
        with pytest.raises(IntegrityError), transaction.atomic(using="payment"):
            rows.update(**{field: MAX_AMOUNT + 1})


def test_the_tax_included_in_the_amount_is_kept_and_shown(admin, service_client, merchant):
    """The sale side (and a user's MANUAL transaction) may say how much of `amount` is tax: from 0
    to the amount, kept and shown; absent, it stays null."""
    order = open_transaction(service_client, merchant, amount=1200, taxAmount=200, channel="SYSTEM")
    manual = open_transaction(admin, merchant, amount=1200, taxAmount=1200, channel="SYSTEM")
    untaxed = open_transaction(admin, merchant, channel="SYSTEM")
    assert (order["taxAmount"], manual["taxAmount"], untaxed["taxAmount"]) == (200, 1200, None)
    assert admin.get(f"{BASE}/transactions/{order['id']}").json()["taxAmount"] == 200
    body = {"merchantId": str(merchant), "amount": 1200, "currency": "EUR", "channel": "SYSTEM"}
    for tax in (-1, 1201, "12", True):
        refused = admin.post(f"{BASE}/transactions", {**body, "sourceId": f"tax-{tax}", "taxAmount": tax}, format="json")
        assert refused.status_code == 400 and [e["field"] for e in refused.json()["errors"]] == ["taxAmount"], refused.json()
    assert not PaymentTransaction.objects.filter(merchant_id=merchant, source_id__startswith="tax-").exists()
    with pytest.raises(IntegrityError), transaction.atomic(using="payment"):
        PaymentTransaction.objects.filter(pk=order["id"]).update(tax_amount=1201)


class TestAFinanceAccountNamedByAUser:
    """A user's (MANUAL) transaction naming a finance account: payment asks finance, with its own
    service account, whether the account is the merchant's (merchant_platform.references)."""

    @pytest.fixture
    def finance(self, live_server, settings):
        settings.PAYMENT_FINANCE_URL = f"{live_server.url}/v1/api/finance"

    @pytest.fixture
    def owner(self, make_caller, seeded, merchant):
        return make_caller(roles=["OWNER"], merchants=[merchant]).client()

    @staticmethod
    def cash_account(merchant_id: int) -> str:
        from apps.finance.services import accounts_ensure_defaults

        return str(next(a.id for a in accounts_ensure_defaults(merchant_id=merchant_id, currency="EUR") if a.system_role == "CASH"))

    def test_the_merchants_own_account_is_taken(self, finance, owner, merchant):
        body = open_transaction(owner, merchant, financeAccountId=self.cash_account(merchant))

        assert body["sourceType"] == "MANUAL" and body["financeAccountId"] == self.cash_account(merchant)

    def test_another_merchants_account_or_none_at_all_is_a_400_and_nothing_is_written(self, finance, owner, merchant):
        for account in (self.cash_account(new_merchant_id()), "999999999999"):
            response = owner.post(
                f"{BASE}/transactions",
                {"merchantId": str(merchant), "sourceId": "manual-1", "amount": 2500, "currency": "EUR", "financeAccountId": account},
                format="json",
            )

            assert response.status_code == 400, response.json()
            assert [error["field"] for error in response.json()["errors"]] == ["financeAccountId"]
        assert not PaymentTransaction.objects.filter(merchant_id=merchant, source_id="manual-1").exists()

    def test_finance_unreachable_is_a_503_and_nothing_is_written(self, owner, merchant, settings):
        settings.PAYMENT_FINANCE_URL = f"http://127.0.0.1:{free_port()}/v1/api/finance"

        response = owner.post(
            f"{BASE}/transactions",
            {"merchantId": str(merchant), "sourceId": "manual-2", "amount": 2500, "currency": "EUR", "financeAccountId": "42"},
            format="json",
        )

        assert response.status_code == 503
        assert not PaymentTransaction.objects.filter(merchant_id=merchant, source_id="manual-2").exists()
