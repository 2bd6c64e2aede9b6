"""A wrong `APP_ENV_APPLICATION_SECRET` on one process (spec 7): two commerce processes of their own
(`APP_SERVICE=commerce manage.py serve`), one started with another secret. A payment webhook for a
merchant whose subscription secret was sealed with the platform's secret reaches that process:
`decrypt failed` is logged and the call answers 500 DECRYPT_FAILED in the problem shape, having
stored nothing; the process keeps serving calls that need no key, the other process (the right
secret) accepts the same webhook, which payment's retry would bring it, and the copy of identity's
key set in Redis the right processes fall back on is neither overwritten nor erased. The in-process variants
(kernel, payment, commerce, ledger) are listed in tests/faults/README.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import requests
from standardwebhooks.webhooks import Webhook

from apps.commerce import seeds
from apps.commerce.models import PaymentSubscription, PaymentWebhookReceipt
from apps.commerce.sales import services as sales
from merchant_platform import crypto
from merchant_platform.verification.jwks import JWKSCache
from tests.commerce.conftest import new_merchant
from tests.support.auth import make_caller, signing_key
from tests.support.ports import free_port, wait_for_port

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]
WEBHOOK_SECRET = "whsec_" + "Zm9yLXRoZS13cm9uZy1zZWNyZXQtdGVzdC0xMjM0NTY="


def commerce_process(spawn, subprocess_env, name: str, **env: str):
    """(its base URL, the process) once it listens."""
    port = free_port()
    process = spawn(
        "manage.py",
        "serve",
        "--roles",
        "web",
        env=subprocess_env(APP_SERVICE="commerce", WSGI_PORT=str(port), WEB_CONCURRENCY="1", **env),
        name=name,
    )
    wait_for_port(port, seconds=60)
    return f"http://127.0.0.1:{port}", process


def test_a_process_with_another_secret_fails_the_calls_needing_it_clearly_and_only_those(spawn, subprocess_env, jwks_url):
    seeds.run()
    merchant = new_merchant()
    sealed = crypto.encrypt(WEBHOOK_SECRET, purpose=sales.SECRET_PURPOSE, associated_data=str(merchant.id).encode())
    PaymentSubscription.objects.create(merchant_id=merchant.id, webhook_id=1, sealed_secret=sealed)
    owner = {"Authorization": f"Bearer {make_caller(roles=[('ADMIN', merchant.id)]).token}"}
    # The right process first: the wrong one's boot fetch of identity's key set comes last.
    right, right_process = commerce_process(spawn, subprocess_env, "right-secret", IDENTITY_JWKS_URL=jwks_url)
    wrong, wrong_process = commerce_process(
        spawn, subprocess_env, "wrong-secret", IDENTITY_JWKS_URL=jwks_url, DJANGO_SETTINGS_MODULE="tests.faults.another_secret_settings"
    )

    body = json.dumps({"event": "transaction.settled", "transaction": {"id": "1", "sourceId": "no-such-order"}})
    now = datetime.now(tz=UTC)
    headers = {
        "content-type": "application/json",
        "webhook-id": "msg_wrong_secret",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(WEBHOOK_SECRET).sign("msg_wrong_secret", now, body),
    }
    path = f"/v1/api/commerce/payment-webhooks/{merchant.id}"
    failed = requests.post(wrong + path, data=body, headers=headers, timeout=30)
    assert failed.status_code == 500 and failed.headers["content-type"].startswith("application/problem+json"), failed.text
    problem = failed.json()
    assert (problem["status"], problem["code"]) == (500, "DECRYPT_FAILED") and "APP_ENV_APPLICATION_SECRET" in problem["detail"]
    assert not PaymentWebhookReceipt.objects.filter(message_id="msg_wrong_secret").exists()  # nothing half-done
    log = wrong_process.output
    assert "decrypt failed" in log and WEBHOOK_SECRET not in log and sealed not in log

    # The same process serves what needs no key; the other process, with the right secret, everything.
    listed = requests.get(f"{wrong}/v1/api/commerce/integrations", params={"merchantId": merchant.id}, headers=owner, timeout=30)
    assert listed.status_code == 200, listed.text
    assert requests.get(f"{wrong}/healthz", timeout=30).status_code == 200
    accepted = requests.post(right + path, data=body, headers=headers, timeout=30)
    assert accepted.status_code == 200 and accepted.json() == {"outcome": "unmatched"}, accepted.text  # no such order: recorded, once
    assert PaymentWebhookReceipt.objects.filter(message_id="msg_wrong_secret").count() == 1
    assert wrong_process.popen.poll() is None and right_process.popen.poll() is None
    # The key set copy the right processes fall back on while identity is down is still theirs.
    assert [key["kid"] for key in JWKSCache._shared_copy()["keys"]] == [signing_key().kid]
