"""Webhooks: configs (secret shown once, stored sealed), Standard Webhooks signatures accepted by the
`standardwebhooks` package, retries with backoff up to maxRetries, the delivery log, redelivery,
the lease that redelivers a killed worker's delivery, and the outbound URL guard."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connections
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.payment import services, webhooks
from apps.payment.models import WebhookConfig, WebhookDelivery
from merchant_platform import outbound
from merchant_platform.errors import ApiError
from tests.payment.conftest import BASE, open_transaction
from tests.support.auth import service_headers

pytestmark = pytest.mark.django_db(databases="__all__")


class Receiver:
    """A subscriber: answers each request with the next planned behaviour (an int status, "sleep"
    for 1 s or a float of seconds to wait, or "close"), then 204."""

    def __init__(self, address: tuple[str, int] = ("127.0.0.1", 0)):
        self.plan: list = []
        self.received: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                return

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                step = receiver.plan.pop(0) if receiver.plan else 204
                if step == "sleep" or isinstance(step, float):
                    time.sleep(1.0 if step == "sleep" else step)
                    step = 204
                if step == "close":
                    self.close_connection = True
                    self.connection.close()
                    return
                self.send_response(step)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(address, Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"


@pytest.fixture
def receiver(settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
    settings.PAYMENT_WEBHOOK_RETRY_BASE_SECONDS = 0.01
    settings.PAYMENT_WEBHOOK_TIMEOUT_SECONDS = 0.3
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


def subscribe(admin, merchant, url, **fields) -> dict:
    body = {"merchantId": str(merchant), "name": "sale", "url": url, "eventTypes": ["transaction.settled", "transaction.created"], **fields}
    response = admin.post(f"{BASE}/webhooks", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def deliver_due() -> list:
    return [services.webhook_deliver(delivery_id=delivery_id) for delivery_id in services.webhook_deliveries_due()]


def test_a_delivery_is_signed_as_standard_webhooks_verifies(admin, merchant, receiver):
    config = subscribe(admin, merchant, receiver.url)
    assert config["secret"].startswith("whsec_") and config["signingMethod"] == "HMAC_SHA256"
    assert config["metadata"] == {"maxRetries": 5}
    stored = WebhookConfig.objects.get(pk=config["id"])
    assert config["secret"] not in stored.secret  # sealed at rest
    shown = admin.get(f"{BASE}/webhooks/{config['id']}").json()
    assert "secret" not in shown
    txn = open_transaction(admin, merchant)
    [delivery] = deliver_due()
    assert delivery.status == "SUCCEEDED" and delivery.attempt_count == 1
    [(headers, body)] = receiver.received
    payload = Webhook(config["secret"]).verify(body, headers)
    assert payload["event"] == "transaction.created" and payload["transaction"]["id"] == txn["id"]
    assert headers["webhook-id"] == delivery.message_id
    assert headers["webhook-event"] == "transaction.created"  # also outside the signed body (the spec's "event type")
    with pytest.raises(WebhookVerificationError):
        Webhook(config["secret"]).verify(body.replace(b"2500", b"2501"), headers)
    log = admin.get(f"{BASE}/webhook-deliveries", {"webhookId": config["id"]}).json()["results"]
    assert log[0]["status"] == "SUCCEEDED" and log[0]["log"][0]["statusCode"] == 204 and "latencyMs" in log[0]["log"][0]


def test_failures_are_retried_with_backoff_then_failed(admin, merchant, receiver):
    subscribe(admin, merchant, receiver.url, eventTypes=["transaction.created"], metadata={"maxRetries": 2})
    receiver.plan = [500, "sleep", "close"]
    open_transaction(admin, merchant)
    [delivery] = deliver_due()
    assert (
        delivery.status == "PENDING"
        and delivery.last_status_code == 500
        and delivery.next_attempt_at > timezone.now() - timedelta(seconds=1)
    )
    for _ in range(50):
        time.sleep(0.05)
        done = deliver_due()
        if done and done[0].status != "PENDING":
            break
    delivery.refresh_from_db()
    assert delivery.status == "FAILED" and delivery.attempt_count == 3
    assert [entry["statusCode"] for entry in delivery.log] == [500, None, None]
    assert delivery.log[1]["error"] == "timeout" and delivery.log[2]["error"]
    assert len({headers["webhook-id"] for headers, _ in receiver.received}) == 1  # one id for every try


def test_a_failed_delivery_is_redelivered_by_hand(admin, merchant, receiver):
    subscribe(admin, merchant, receiver.url, eventTypes=["transaction.created"], metadata={"maxRetries": 0})
    receiver.plan = [503]
    open_transaction(admin, merchant)
    [delivery] = deliver_due()
    assert delivery.status == "FAILED"
    response = admin.post(f"{BASE}/webhook-deliveries/{delivery.id}/actions/redeliver")
    assert response.status_code == 200 and response.json()["status"] == "PENDING"
    assert admin.post(f"{BASE}/webhook-deliveries/{delivery.id}/actions/redeliver").status_code == 409
    [again] = deliver_due()
    assert again.status == "SUCCEEDED"
    assert receiver.received[0][0]["webhook-id"] == receiver.received[1][0]["webhook-id"]


def test_a_claimed_delivery_is_not_sent_twice_and_a_dead_workers_is_sent_after_its_lease(admin, merchant, receiver):
    subscribe(admin, merchant, receiver.url, eventTypes=["transaction.created"])
    open_transaction(admin, merchant)
    [delivery_id] = services.webhook_deliveries_due()
    # A worker claimed it and died before recording anything: the lease holds it back...
    WebhookDelivery.objects.filter(pk=delivery_id).update(next_attempt_at=timezone.now() + timedelta(seconds=60))
    assert services.webhook_deliveries_due() == [] and services.webhook_deliver(delivery_id=delivery_id) is None
    # ...until it runs out; then the sweep sends it.
    WebhookDelivery.objects.filter(pk=delivery_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    [delivery] = deliver_due()
    assert delivery.status == "SUCCEEDED" and len(receiver.received) == 1


def test_a_batch_sends_at_once_and_records_a_fast_subscriber_before_a_slow_one_answers(admin, merchant, receiver, settings):
    settings.PAYMENT_WEBHOOK_TIMEOUT_SECONDS = 3.0
    slow = Receiver()
    try:
        subscribe(admin, merchant, receiver.url, eventTypes=["transaction.created"])
        subscribe(admin, merchant, slow.url, eventTypes=["transaction.created"], name="slow")
        slow.plan = ["sleep"]  # answers after 1 s
        open_transaction(admin, merchant)
        fast_id, slow_id = (WebhookDelivery.objects.values_list("id", flat=True).get(webhook__url=url) for url in (receiver.url, slow.url))
        started = timezone.now()
        tried = services.webhook_deliver_many(delivery_ids=[fast_id, slow_id])
        assert {delivery.id: delivery.status for delivery in tried} == {fast_id: "SUCCEEDED", slow_id: "SUCCEEDED"}
        recorded_after = {
            delivery.id: (datetime.fromisoformat(delivery.log[-1]["at"]) - started).total_seconds()
            for delivery in WebhookDelivery.objects.filter(pk__in=[fast_id, slow_id])
        }
        assert recorded_after[fast_id] < 0.5 and recorded_after[slow_id] >= 1.0
    finally:
        slow.server.shutdown()
        slow.server.server_close()


@pytest.mark.django_db(databases="__all__", transaction=True)  # the other worker's claim, from the sending thread, commits
def test_a_try_whose_lease_was_taken_over_meanwhile_is_not_recorded(admin, merchant, receiver, monkeypatch):
    subscribe(admin, merchant, receiver.url, eventTypes=["transaction.created"])
    open_transaction(admin, merchant)
    [delivery_id] = services.webhook_deliveries_due()
    send = webhooks.send

    def send_while_the_lease_runs_out(**kwargs):
        answer = send(**kwargs)
        # The try took longer than the lease: another worker claimed the delivery in the meantime.
        try:
            WebhookDelivery.objects.filter(pk=delivery_id).update(next_attempt_at=timezone.now() + timedelta(seconds=60))
        finally:
            connections.close_all()  # this sending thread's own connection
        return answer

    monkeypatch.setattr(webhooks, "send", send_while_the_lease_runs_out)
    assert services.webhook_deliver(delivery_id=delivery_id) is None
    row = WebhookDelivery.objects.get(pk=delivery_id)
    assert (row.status, row.attempt_count, row.log) == ("PENDING", 0, []) and len(receiver.received) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://10.1.2.3/x",
        "http://169.254.169.254/latest",
        "http://localhost/x",
        "http://[::1]/x",
        "ftp://example.com/x",
        "http://user:pw@example.com/",
    ],
)
def test_private_and_non_http_urls_are_refused(admin, merchant, settings, url):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = False
    body = {"merchantId": str(merchant), "name": "x", "url": url, "eventTypes": ["transaction.created"]}
    response = admin.post(f"{BASE}/webhooks", body, format="json")
    assert response.status_code == 400, (url, response.json())


def platform_subscription(merchant, settings, **fields) -> dict:
    """The subscription commerce makes at a merchant's first placing (service credentials)."""
    url = f"{settings.COMMERCE_PAYMENT_WEBHOOK_URL}/{merchant}"
    body = {"merchantId": str(merchant), "name": "sale side", "url": url, "eventTypes": ["transaction.created"], **fields}
    made = APIClient().post(f"{BASE}/webhooks", body, format="json", **service_headers())
    assert made.status_code == 201 and made.json()["internal"] is True, made.json()
    return made.json()


def test_a_platform_services_own_webhook_targets_only_the_platforms_receivers(admin, merchant, settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = False
    settings.COMMERCE_PAYMENT_WEBHOOK_URL = "http://10.1.2.3/v1/api/commerce/payment-webhooks"
    made = platform_subscription(merchant, settings)
    service = APIClient()
    service.credentials(**service_headers())
    elsewhere = {"merchantId": str(merchant), "name": "x", "url": "http://10.9.9.9/hooks", "eventTypes": ["transaction.created"]}
    refused = service.post(f"{BASE}/webhooks", elsewhere, format="json")
    assert refused.status_code == 400 and [error["field"] for error in refused.json()["errors"]] == ["url"], refused.json()
    moved = service.patch(f"{BASE}/webhooks/{made['id']}", {"url": "http://10.9.9.9/hooks"}, format="json")
    assert moved.status_code == 400 and [error["field"] for error in moved.json()["errors"]] == ["url"], moved.json()
    assert admin.post(f"{BASE}/webhooks", {**elsewhere, "url": made["url"]}, format="json").status_code == 400  # a user's never
    base = settings.COMMERCE_PAYMENT_WEBHOOK_URL
    for url in (f"{base}/../../identity/x", f"{base}/1?next=x", f"{base}-evil/1", f"{base}/1/2", f"{base}/.."):
        assert not webhooks.is_platform_url(url), url
    assert webhooks.is_platform_url(f"{base}/{merchant}") and webhooks.is_platform_url(base)


def test_a_merchant_can_neither_see_nor_repoint_nor_replay_the_platforms_webhook(admin, merchant, settings, receiver, make_caller):
    """The SSRF of a re-pointed internal webhook: hidden from users (404), refused by the services
    for a user's request (403 WEBHOOK_PLATFORM_OWNED), and a URL changed behind the API's back is
    not connected to."""
    settings.COMMERCE_PAYMENT_WEBHOOK_URL = receiver.url
    made = platform_subscription(merchant, settings)
    open_transaction(admin, merchant)
    [delivery] = deliver_due()
    assert delivery.status == "SUCCEEDED" and len(receiver.received) == 1
    owner = make_caller(roles=[("OWNER", merchant)], merchants=[merchant]).client()
    for client in (owner, admin):
        assert client.get(f"{BASE}/webhooks").json()["results"] == []
        assert client.get(f"{BASE}/webhook-deliveries").json()["results"] == []
        assert client.get(f"{BASE}/webhooks/{made['id']}").status_code == 404
        patched = client.patch(f"{BASE}/webhooks/{made['id']}", {"url": "http://127.0.0.2:9/x"}, format="json")
        assert patched.status_code == 404 and patched.json()["code"] == "NOT_FOUND", patched.json()
        assert client.delete(f"{BASE}/webhooks/{made['id']}").status_code == 404
        assert client.post(f"{BASE}/webhook-deliveries/{delivery.id}/actions/redeliver").status_code == 404
    config = WebhookConfig.objects.get(pk=made["id"])
    assert (config.url, config.deleted_at) == (made["url"], None)
    for write in (
        lambda: services.webhook_update(webhook_id=config.id, by_user=True, url="http://127.0.0.2:9/x"),
        lambda: services.webhook_delete(webhook_id=config.id, by_user=True),
        lambda: services.webhook_redeliver(delivery_id=delivery.id, by_user=True),
    ):
        with pytest.raises(ApiError) as refused:
            write()
        assert (refused.value.status_code, refused.value.code) == (403, "WEBHOOK_PLATFORM_OWNED")
    service = APIClient()
    service.credentials(**service_headers())
    assert service.get(f"{BASE}/webhooks/{made['id']}").status_code == 200
    WebhookConfig.objects.filter(pk=config.id).update(url="http://127.0.0.2:9/x")  # changed behind the API's back
    assert service.post(f"{BASE}/webhook-deliveries/{delivery.id}/actions/redeliver").status_code == 200
    [again] = deliver_due()
    assert again.status == "PENDING" and again.last_status_code is None and webhooks.PLATFORM_URL_ONLY in again.last_error


def test_bad_webhook_input_is_a_400(admin, merchant, receiver):
    for body in [
        {"merchantId": str(merchant), "name": "x", "url": receiver.url, "eventTypes": ["nope"]},
        {"merchantId": str(merchant), "name": "x", "url": receiver.url, "eventTypes": []},
        {
            "merchantId": str(merchant),
            "name": "x",
            "url": receiver.url,
            "eventTypes": ["transaction.created"],
            "metadata": {"maxRetries": 99},
        },
        {"merchantId": str(merchant), "name": "x", "url": receiver.url, "eventTypes": ["transaction.created"], "signingMethod": "MD5"},
    ]:
        assert admin.post(f"{BASE}/webhooks", body, format="json").status_code == 400, body
    config = subscribe(admin, merchant, receiver.url)
    moved = admin.patch(f"{BASE}/webhooks/{config['id']}", {"merchantId": "1"}, format="json")
    assert moved.status_code == 400
    renamed = admin.patch(f"{BASE}/webhooks/{config['id']}", {"name": "renamed", "metadata": {"maxRetries": 1}}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed" and renamed.json()["metadata"] == {"maxRetries": 1}
    assert admin.delete(f"{BASE}/webhooks/{config['id']}").status_code == 204
    assert json.loads(json.dumps(admin.get(f"{BASE}/webhooks").json()))["results"] == []


def test_a_deactivated_webhook_gets_nothing_more(admin, merchant, receiver):
    config = subscribe(admin, merchant, receiver.url, eventTypes=["transaction.created"])
    open_transaction(admin, merchant)
    assert admin.patch(f"{BASE}/webhooks/{config['id']}", {"status": "INACTIVE"}, format="json").json()["status"] == "INACTIVE"
    [delivery] = deliver_due()
    assert delivery.status == "FAILED" and delivery.last_error == "webhook inactive" and receiver.received == []
    open_transaction(admin, merchant)
    assert services.webhook_deliveries_due() == []  # no new delivery for an inactive webhook


def test_another_merchants_webhooks_and_deliveries_answer_404(admin, merchant, receiver, make_caller):
    config = subscribe(admin, merchant, receiver.url, eventTypes=["transaction.created"])
    open_transaction(admin, merchant)
    [delivery_id] = services.webhook_deliveries_due()
    other = make_caller(roles=[("OWNER", 42)], merchants=[42]).client()
    assert other.get(f"{BASE}/webhooks/{config['id']}").status_code == 404
    assert other.patch(f"{BASE}/webhooks/{config['id']}", {"name": "mine"}, format="json").status_code == 404
    assert other.get(f"{BASE}/webhook-deliveries/{delivery_id}").status_code == 404
    assert other.post(f"{BASE}/webhook-deliveries/{delivery_id}/actions/redeliver").status_code == 404
    assert other.get(f"{BASE}/webhooks").json()["results"] == [] and other.get(f"{BASE}/webhook-deliveries").json()["results"] == []
    owner = make_caller(roles=[("OWNER", merchant)], merchants=[merchant]).client()
    assert owner.get(f"{BASE}/webhook-deliveries/{delivery_id}").status_code == 200


def rebinding_dns(monkeypatch, name: str, first: str, then: str) -> None:
    """`name` resolves to `first` once, then to `then` (a DNS rebinding); other names as usual."""
    resolve, answers = socket.getaddrinfo, [first]

    def getaddrinfo(host, port, *args, **kwargs):
        if host != name:
            return resolve(host, port, *args, **kwargs)
        address = answers.pop() if answers else then
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_try_connects_to_the_address_the_guard_checked(receiver, settings, monkeypatch):
    """DNS rebinding: the name answers an address the guard accepts, then a loopback one. The try
    goes to the checked address (127.0.0.2 plays a public one here), with the URL's host as Host."""
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = False
    is_public = outbound.is_public
    monkeypatch.setattr(outbound, "is_public", lambda address: str(address) == "127.0.0.2" or is_public(address))
    port = receiver.server.server_address[1]
    checked = Receiver(("127.0.0.2", port))  # the same port on another loopback address
    try:
        rebinding_dns(monkeypatch, "hooks.test", first="127.0.0.2", then="127.0.0.1")
        result = webhooks.send(url=f"http://hooks.test:{port}/hooks", secret=webhooks.new_secret(), message_id="msg_1", payload={})
        assert result.ok, result
        assert receiver.received == []  # the loopback answer was never connected to
        [(headers, _body)] = checked.received
        assert headers["host"] == f"hooks.test:{port}"
    finally:
        checked.server.shutdown()
        checked.server.server_close()
