"""The pending-queue gauge (spec 8 payment queue alert) on the platform's GET /metrics: attempts
waiting for the provider plus webhook deliveries waiting to be sent, read from the database when
the page is scraped."""

from __future__ import annotations

import pytest
from django.db.utils import OperationalError

from apps.payment import services
from apps.payment.models import WebhookDelivery
from tests.payment.conftest import new_merchant_id

pytestmark = pytest.mark.django_db(databases="__all__")


def scraped(client) -> float | None:
    page = client.get("/metrics")
    assert page.status_code == 200
    lines = page.content.decode().splitlines()
    assert ("# TYPE payment_pending_queue gauge" in lines) == any(line.startswith("payment_pending_queue ") for line in lines)
    return next((float(line.split()[1]) for line in lines if line.startswith("payment_pending_queue ")), None)


def test_the_pending_queue_is_a_gauge_on_the_metrics_page(client, settings, webhook_for):
    settings.OUTREACH_METRICS_ENABLED = True
    before = scraped(client)
    assert before == services.pending_queue_length()

    merchant_id = new_merchant_id()
    webhook_for(merchant_id)  # subscribed to every event: each event leaves one pending delivery
    created = services.transaction_create(merchant_id=merchant_id, source_id="order-gauge", amount=1200, currency="EUR")

    # One CREATED attempt, and the deliveries of transaction.created and attempt.created.
    assert scraped(client) == before + 3

    services.attempt_send(attempt_id=created.attempt.id)  # no integration: FAILED, plus attempt.failed's delivery
    assert scraped(client) == before + 3
    WebhookDelivery.objects.using("payment").filter(merchant_id=merchant_id).update(status=WebhookDelivery.Status.SUCCEEDED)
    assert scraped(client) == before


def test_a_database_that_does_not_answer_leaves_the_gauge_out_not_the_page(client, settings, monkeypatch):
    settings.OUTREACH_METRICS_ENABLED = True

    def unreachable():
        raise OperationalError("connection refused")

    monkeypatch.setattr(services, "pending_queue_length", unreachable)
    assert scraped(client) is None


@pytest.fixture
def webhook_for(settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True

    def make(merchant_id: int):
        config, _secret = services.webhook_create(merchant_id=merchant_id, name="gauge", url="http://127.0.0.1:9/hooks", event_types=["*"])
        return config

    return make
