"""The limit payment's IPN confirmation is read against: a bare Django project (no middleware, no
apps of ours) whose one view does what a confirmation cannot do without: parse the provider's JSON
body, check its HMAC-SHA512 signature by the spec's rule (every field but prov_SecureHash, sorted by
name, `name=value` joined by `&`, upper-case hex, compared in constant time) and confirm the attempt
with one UPDATE of payment.payment_attempt, over a pooled psycopg connection set up as the
platform's (settings/database.py). The secret is given in the environment (BENCH_PAYMENT_SECRET):
the platform reads and opens the merchant's sealed integration instead. Served only by the bench.

Its second view, `/required`, is not a target either: the floor of the whole confirmation the issue
requires, in raw SQL on the same connection, with none of the platform (no ORM, no DRF, no
middleware, no event registry, no WebSocket notice, no outbox relay): the attempt read, the
merchant's sealed integration read and opened (AES-256-GCM, the key derived as
merchant_platform.crypto derives it from BENCH_PAYMENT_APP_SECRET), the signature and amount checks,
then in one transaction the transaction row locked, the attempt confirmed by a conditional UPDATE,
the transaction paid and settled, the three outbox rows in one INSERT and the merchant's webhook
configs read: 9 statements, BEGIN and COMMIT included.

This one module is the project's settings (DJANGO_SETTINGS_MODULE=benchmarks.payment_bare), its
URLconf and its WSGI application (`benchmarks.payment_bare:application`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import uuid
from datetime import UTC, datetime

import environ

SECRET_KEY = "bench-only-payment-bare"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "benchmarks.payment_bare"
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
USE_TZ = True
DATABASES = {"default": environ.Env.db_url_config(os.environ["DATABASE_URL"])}
DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"]["OPTIONS"] = {"options": "-c search_path=payment", "pool": {"min_size": 1, "max_size": 8, "timeout": 10.0}}

os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.payment_bare"

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: E402
from cryptography.hazmat.primitives.kdf.hkdf import HKDF  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

PROVIDER_SECRET = os.environ["BENCH_PAYMENT_SECRET"].encode()
CONFIRM = (
    "UPDATE payment.payment_attempt SET status = '302_SUCCESS', paid_at = now(), updated_at = now() "
    "WHERE code = %s AND channel = 'QR' AND status = 'SENT' AND amount * 100 = %s"
)


@csrf_exempt
def ipn_view(request):
    fields = json.loads(request.body)
    message = "&".join(f"{name}={fields[name]}" for name in sorted(fields) if name != "prov_SecureHash")
    expected = hmac.new(PROVIDER_SECRET, message.encode(), hashlib.sha512).hexdigest().upper()
    if not hmac.compare_digest(expected.encode(), str(fields.get("prov_SecureHash", "")).encode()):
        return JsonResponse({"RspCode": "97", "Message": "Invalid signature"})
    with connection.cursor() as cursor:
        cursor.execute(CONFIRM, [fields["prov_TxnRef"], int(fields["prov_Amount"])])
        confirmed = cursor.rowcount == 1
    return JsonResponse({"RspCode": "00", "Message": "Confirm Success"} if confirmed else {"RspCode": "02", "Message": "Not confirmed"})


INTEGRATION = (
    "SELECT id, credential FROM public.configuration WHERE \"group\" = 'INTEGRATION' AND principal_type = 'MERCHANT' "
    "AND principal_id = %s AND code = %s AND environment = 'sandbox' AND status = 'ACTIVE' AND deleted_at IS NULL LIMIT 1"
)
ATTEMPT = "SELECT id, transaction_id, merchant_id, amount, status FROM payment.payment_attempt WHERE code = %s AND channel = %s"
LOCK_TRANSACTION = (
    "SELECT merchant_id, source_id, amount, paid_amount, currency, finance_account_id, lines::text, status, created_at "
    "FROM payment.payment_transaction WHERE id = %s FOR UPDATE"
)
SUCCEED = (
    "UPDATE payment.payment_attempt SET status = '302_SUCCESS', provider_reference = %s, bank_code = %s, paid_at = %s, "
    "updated_at = now() WHERE id = %s AND status IN ('CREATED', 'SENT', 'UNKNOWN') "
    "RETURNING channel, code, failure_reason, expires_at"
)
PAY = "UPDATE payment.payment_transaction SET paid_amount = %s, status = %s, settled_at = %s, updated_at = now() WHERE id = %s"
OUTBOX = (
    "INSERT INTO payment.payment_outboxmessage (message_id, topic, key, value, headers, created_at, parked_reason) "
    "VALUES (%s, %s, %s, %s, %s, now(), ''), (%s, %s, %s, %s, %s, now(), ''), (%s, %s, %s, %s, %s, now(), '')"
)
WEBHOOKS = "SELECT id, event_types FROM payment.webhook_config WHERE merchant_id = %s AND status = 'ACTIVE' AND deleted_at IS NULL"
APP_SECRET = os.environ.get("BENCH_PAYMENT_APP_SECRET", "")
CREDENTIAL_KEY = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"merchant-platform", info=b"configuration-credential").derive(
    APP_SECRET.encode()
)


def _open(row_id: int, sealed: str) -> bytes:
    body = sealed.partition(".")[2]
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    return AESGCM(CREDENTIAL_KEY).decrypt(raw[:12], raw[12:], str(row_id).encode())


def _outbox_row(topic: str, key: str, body: dict) -> list:
    message_id = uuid.uuid4().hex
    headers = {"eventType": body["event"], "source": "payment", "messageId": message_id}
    return [message_id, topic, key, json.dumps(body), json.dumps(headers)]


@csrf_exempt
def required_view(request):
    fields = json.loads(request.body)
    with connection.cursor() as cursor:
        cursor.execute(ATTEMPT, [fields["prov_TxnRef"], "QR"])
        attempt = cursor.fetchone()
        if attempt is None:
            return JsonResponse({"RspCode": "01", "Message": "Order not found"})
        attempt_id, transaction_id, merchant_id, amount, _status = attempt
        cursor.execute(INTEGRATION, [merchant_id, "QR"])
        row_id, sealed = cursor.fetchone()
        secret = _open(row_id, sealed)
    message = "&".join(f"{name}={fields[name]}" for name in sorted(fields) if name != "prov_SecureHash")
    expected = hmac.new(secret, message.encode(), hashlib.sha512).hexdigest().upper()
    if not hmac.compare_digest(expected.encode(), str(fields.get("prov_SecureHash", "")).encode()):
        return JsonResponse({"RspCode": "97", "Message": "Invalid signature"})
    if int(fields["prov_Amount"]) != amount * 100:
        return JsonResponse({"RspCode": "04", "Message": "Invalid amount"})
    paid_at = datetime.strptime(fields["prov_PayDate"], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(LOCK_TRANSACTION, [transaction_id])
        _merchant, source_id, total, paid, currency, account, lines, status, created_at = cursor.fetchone()
        cursor.execute(SUCCEED, [fields["prov_TransactionNo"], fields["prov_BankCode"], paid_at, attempt_id])
        moved = cursor.fetchone()
        if moved is None:
            return JsonResponse({"RspCode": "02", "Message": "Order already confirmed"})
        channel, code, failure_reason, expires_at = moved
        paid += amount
        settled_at = datetime.now(UTC) if paid >= total and status == "NEW" else None
        status = "SETTLED" if settled_at else status
        cursor.execute(PAY, [paid, status, settled_at, transaction_id])
        txn = {
            "id": str(transaction_id),
            "merchantId": str(merchant_id),
            "sourceId": source_id,
            "amount": total,
            "paidAmount": paid,
            "currency": currency,
            "financeAccountId": None if account is None else str(account),
            "lines": json.loads(lines),
            "status": status,
            "createdAt": created_at.isoformat(),
            "settledAt": settled_at.isoformat() if settled_at else None,
        }
        attempt_body = {
            "id": str(attempt_id),
            "transactionId": str(transaction_id),
            "code": code,
            "channel": channel,
            "amount": amount,
            "status": "302_SUCCESS",
            "providerReference": fields["prov_TransactionNo"],
            "bankCode": fields["prov_BankCode"],
            "failureReason": failure_reason,
            "expiresAt": expires_at.isoformat() if expires_at else None,
            "paidAt": paid_at.isoformat(),
        }
        now = datetime.now(UTC).isoformat()
        success = {"event": "attempt.success", "timestamp": now, "source": "payment", "transaction": txn, "attempt": attempt_body}
        settled = {**success, "event": "transaction.settled"}
        order = {"merchantId": str(merchant_id), "lines": txn["lines"]}
        cursor.execute(
            OUTBOX,
            _outbox_row("payment.events", str(transaction_id), success)
            + _outbox_row("payment.success", source_id, {**success, "order": order})
            + _outbox_row("payment.events", str(transaction_id), settled),
        )
        cursor.execute(WEBHOOKS, [merchant_id])
        cursor.fetchall()
    return JsonResponse({"RspCode": "00", "Message": "Confirm Success"})


def healthz_view(request):
    return JsonResponse({"status": "ok"})


urlpatterns = [path("healthz", healthz_view), path("ipn", ipn_view), path("required", required_view)]
