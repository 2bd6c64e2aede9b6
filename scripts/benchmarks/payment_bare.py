"""The limit payment's IPN confirmation is read against: a bare Django project (no middleware, no
apps of ours) whose one view does what a confirmation cannot do without: parse the provider's JSON
body, check its HMAC-SHA512 signature by the spec's rule (every field but prov_SecureHash, sorted by
name, `name=value` joined by `&`, upper-case hex, compared in constant time) and confirm the attempt
with one UPDATE of payment.payment_attempt, over a pooled psycopg connection set up as the
platform's (settings/database.py). The secret is given in the environment (BENCH_PAYMENT_SECRET):
the platform reads and opens the merchant's sealed integration instead. Served only by the bench.

This one module is the project's settings (DJANGO_SETTINGS_MODULE=benchmarks.payment_bare), its
URLconf and its WSGI application (`benchmarks.payment_bare:application`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

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

from django.db import connection  # noqa: E402
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


def healthz_view(request):
    return JsonResponse({"status": "ok"})


urlpatterns = [path("healthz", healthz_view), path("ipn", ipn_view)]
