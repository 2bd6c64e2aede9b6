"""Development (APP_ENV=development): `manage.py fake_provider`, the process scripts/run starts, and
the development integration that lets a merchant without an integration of its own pay through it:
create a transaction over HTTP, get the QR payload, the customer pays at the fake provider, its
signed IPN reaches our endpoint and the transaction settles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from django.conf import settings as django_settings
from django.db import connections

from apps.payment.models import PaymentTransaction
from tests.payment.conftest import BASE, new_merchant_id
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
MANAGE = Path(django_settings.BASE_DIR) / "manage.py"


@pytest.fixture
def fake_provider_process(secret):
    """`manage.py fake_provider` as scripts/run starts it, on a free port; stopped after the test."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(MANAGE), "fake_provider", "--secret", secret, "--port", str(port), "--retry-interval", "0.2"],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "settings.test"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        # Log lines (JSON-ish key=value) come first; then the command says where it listens.
        announced = next((line.strip() for line in process.stdout if line.startswith("fake provider on ")), None)
        assert announced == f"fake provider on http://127.0.0.1:{port}"
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.usefixtures("seeded")
def test_a_merchant_without_an_integration_pays_through_the_development_provider(
    live_server, settings, make_caller, secret, fake_provider_process
):
    settings.PAYMENT_IPN_BASE_URL = live_server.url
    settings.PAYMENT_DEVELOPMENT_PROVIDER = True
    settings.PAYMENT_FAKE_PROVIDER_SECRET = secret
    settings.PAYMENT_FAKE_PROVIDER_PORT = fake_provider_process
    merchant_id = new_merchant_id()  # no Configuration row of its own
    headers = {"Authorization": f"Bearer {make_caller(roles=['ADMIN']).token}"}

    response = requests.post(
        f"{live_server.url}{BASE}/transactions",
        json={"merchantId": str(merchant_id), "sourceId": "order-dev", "amount": 1500, "currency": "EUR"},
        headers=headers,
        timeout=10,
    )
    assert response.status_code == 201, response.text
    [attempt] = response.json()["attempts"]
    assert attempt["status"] == "SENT" and attempt["code"] in attempt["qrPayload"]

    paid = requests.post(f"http://127.0.0.1:{fake_provider_process}/payments/{attempt['code']}/pay", timeout=10)
    assert paid.status_code == 202

    def settled() -> bool:
        connections.close_all()
        return PaymentTransaction.objects.get(pk=response.json()["id"]).status == "SETTLED"

    wait_for(settled, message="the transaction settled by the fake provider's IPN")
    refunded = requests.post(
        f"{live_server.url}{BASE}/transactions/{response.json()['id']}/refunds",
        json={"amount": 500, "currency": "EUR", "reason": "returned"},
        headers=headers,
        timeout=10,
    )
    assert refunded.status_code == 201 and refunded.json()["status"] == "SUCCEEDED", refunded.text


def test_without_the_development_provider_a_merchant_needs_its_own_integration(admin, settings, secret, fake_provider_process):
    settings.PAYMENT_DEVELOPMENT_PROVIDER = False
    settings.PAYMENT_FAKE_PROVIDER_SECRET = secret
    settings.PAYMENT_FAKE_PROVIDER_PORT = fake_provider_process
    response = admin.post(
        f"{BASE}/transactions",
        {"merchantId": str(new_merchant_id()), "sourceId": "order-x", "amount": 10, "currency": "EUR"},
        format="json",
    )
    [attempt] = response.json()["attempts"]
    assert (attempt["status"], attempt["failureReason"]) == ("FAILED", "integration not found")


def test_the_development_provider_is_refused_outside_development():
    completed = subprocess.run(
        [sys.executable, "-c", "import settings"],
        env={**os.environ, "APP_ENV": "test", "PAYMENT_DEVELOPMENT_PROVIDER": "true", "DJANGO_SETTINGS_MODULE": "settings"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=django_settings.BASE_DIR,
    )
    assert completed.returncode == 1
    assert "PAYMENT_DEVELOPMENT_PROVIDER is for APP_ENV=development only" in completed.stderr
