"""The Django admin: read-only payment records (refunds included); cancel and redeliver are actions
that call the services (events emitted as through the API); a webhook's secret is never on the page."""

from __future__ import annotations

import pytest

from apps.payment import services
from apps.payment.models import OutboxMessage, PaymentAttempt, PaymentTransaction, Refund
from tests.payment.conftest import add_integration, new_merchant_id

pytestmark = pytest.mark.django_db(databases="__all__")


def test_transactions_are_read_only_and_cancel_goes_through_the_service(admin_client):
    created = services.transaction_create(merchant_id=new_merchant_id(), source_id="o-1", amount=100, currency="EUR", channel="SYSTEM")
    txn = created.transaction
    page = admin_client.get(f"/admin/payment/paymenttransaction/{txn.id}/change/")
    assert page.status_code == 200 and b"o-1" in page.content and b'name="amount"' not in page.content
    assert admin_client.get("/admin/payment/paymenttransaction/add/").status_code == 403
    response = admin_client.post("/admin/payment/paymenttransaction/", {"action": "cancel", "_selected_action": [txn.id]})
    assert response.status_code == 302
    assert PaymentTransaction.objects.get(pk=txn.id).status == "CANCELLED"
    assert OutboxMessage.objects.filter(key=str(txn.id), headers__eventType="transaction.cancelled").count() == 1


def test_a_webhook_page_never_shows_its_secret(admin_client):
    config, secret = services.webhook_create(merchant_id=new_merchant_id(), name="w", url="https://93.184.215.14/h", event_types=["*"])
    page = admin_client.get(f"/admin/payment/webhookconfig/{config.id}/change/")
    assert page.status_code == 200 and b"93.184.215.14" in page.content
    assert secret.encode() not in page.content and config.secret.encode() not in page.content


def test_refunds_are_listed_read_only_with_their_amounts(admin_client, secret):
    merchant_id = new_merchant_id()
    add_integration(merchant_id, channel="SYSTEM", secret=secret)
    created = services.transaction_create(merchant_id=merchant_id, source_id="o-r", amount=1100, currency="EUR", channel="SYSTEM")
    # Paid at the till (the IPN's effect, written directly: this test is about the admin page).
    PaymentTransaction.objects.filter(pk=created.transaction.id).update(status="SETTLED", paid_amount=1100)
    PaymentAttempt.objects.filter(pk=created.attempt.id).update(status="302_SUCCESS")
    refund = services.refund_create(transaction_id=created.transaction.id, amount=1100, currency="EUR", reason="damaged", by_service=True)
    page = admin_client.get("/admin/payment/refund/")
    assert page.status_code == 200 and b"11.00 EUR" in page.content
    detail = admin_client.get(f"/admin/payment/refund/{refund.id}/change/")
    assert detail.status_code == 200 and b"damaged" in detail.content and b'name="amount"' not in detail.content
    assert admin_client.get("/admin/payment/refund/add/").status_code == 403
    assert Refund.objects.get(pk=refund.id).status == "PENDING"  # SYSTEM: the cashier confirms
