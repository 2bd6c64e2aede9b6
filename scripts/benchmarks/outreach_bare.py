"""The limit outreach's public submit is read against: a bare Django view that parses the JSON body
and does one INSERT into the same table (outreach.inquiry), with no middleware, no validation and no
notification, over the same pooled psycopg connection the platform uses. Served only by the bench.

This one module is the project's settings (DJANGO_SETTINGS_MODULE=benchmarks.outreach_bare), its
URLconf and its WSGI application (`benchmarks.outreach_bare:application`).
"""

from __future__ import annotations

import json
import os
import secrets

import environ

SECRET_KEY = "bench-only-outreach-bare"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "benchmarks.outreach_bare"
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
USE_TZ = True
# The platform's pool settings (settings/database.py): psycopg's pool, CONN_MAX_AGE 0.
DATABASES = {"default": environ.Env.db_url_config(os.environ["DATABASE_URL"])}
DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"]["OPTIONS"] = {"pool": {"min_size": 1, "max_size": 8, "timeout": 10.0}}

os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.outreach_bare"

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

from django.db import connection  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

INSERT = (
    "INSERT INTO outreach.inquiry (id, created_at, updated_at, name, email, phone, subject, message, merchant_id, status) "
    "VALUES (%s, now(), now(), %s, %s, '', %s, %s, %s, 'SENT')"
)


@csrf_exempt
def insert_view(request):
    data = json.loads(request.body)
    row_id = secrets.randbits(62)
    with connection.cursor() as cursor:
        cursor.execute(INSERT, [row_id, data["name"], data["email"], data["subject"], data["message"], data.get("merchantId")])
    return JsonResponse({"id": str(row_id), "status": "SENT"}, status=201)


def healthz_view(request):
    return JsonResponse({"status": "ok"})


urlpatterns = [path("healthz", healthz_view), path("insert", insert_view)]
