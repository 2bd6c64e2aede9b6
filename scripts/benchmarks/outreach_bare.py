"""The limit outreach's public submit is read against: a bare Django project (no middleware, no
apps of ours) whose views parse the same JSON body and INSERT one row into the same table
(outreach.inquiry) over a pooled psycopg connection set up as the platform's (settings/database.py).
Served only by the bench.

- `/insert`: the INSERT through `connection.cursor()`: the cheapest INSERT a Django view can make.
- `/orm`: the same row through `Model.objects.create()`, as a Django view usually writes it.
- `/required`: what the issue requires of the submit, with nothing of the platform: DRF validation
  of the same fields and limits (plain DRF fields: the platform's also refuse control characters and
  non-string values), the INSERT through the ORM, and the notification as two PUBLISHes in one
  round trip on the request's thread. Not a target: the floor a Django implementation of the
  feature starts from, shown next to (a) and (a2).

This one module is the project's settings (DJANGO_SETTINGS_MODULE=benchmarks.outreach_bare), its
URLconf, its one model and its WSGI application (`benchmarks.outreach_bare:application`).
"""

from __future__ import annotations

import json
import os
import secrets

import environ
import redis

SECRET_KEY = "bench-only-outreach-bare"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "benchmarks.outreach_bare"
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
USE_TZ = True
# The platform's settings for a service alias (settings/database.py): psycopg's pool, CONN_MAX_AGE 0,
# the service's schema first on the search path.
DATABASES = {"default": environ.Env.db_url_config(os.environ["DATABASE_URL"])}
DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"]["OPTIONS"] = {"options": "-c search_path=outreach", "pool": {"min_size": 1, "max_size": 8, "timeout": 10.0}}

os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.outreach_bare"

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

from django.db import connection, models  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402
from rest_framework import serializers  # noqa: E402


class Inquiry(models.Model):
    """outreach.inquiry's columns as plain Django fields (the platform's model needs the kernel)."""

    id = models.BigIntegerField(primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True)
    created_by = models.BigIntegerField(null=True)
    name = models.CharField(max_length=120)
    email = models.CharField(max_length=254)
    phone = models.CharField(max_length=16, default="")
    subject = models.CharField(max_length=200)
    message = models.TextField()
    merchant_id = models.BigIntegerField(null=True)
    status = models.CharField(max_length=16, default="SENT")

    class Meta:
        app_label = "outreach_bare"  # a model outside INSTALLED_APPS: nothing to migrate, no admin
        db_table = "inquiry"
        managed = False

    def __str__(self) -> str:
        return self.subject


def create_inquiry(data: dict) -> Inquiry:
    return Inquiry.objects.create(
        id=secrets.randbits(62),
        name=data["name"],
        email=data["email"],
        phone=data.get("phone", ""),
        subject=data["subject"],
        message=data["message"],
        merchant_id=data.get("merchantId"),
    )


@csrf_exempt
def orm_view(request):
    inquiry = create_inquiry(json.loads(request.body))
    return JsonResponse({"id": str(inquiry.id), "status": inquiry.status}, status=201)


INSERT = (
    "INSERT INTO outreach.inquiry (id, created_at, updated_at, name, email, phone, subject, message, merchant_id, status) "
    "VALUES (%s, now(), now(), %s, %s, '', %s, %s, %s, 'SENT')"
)


@csrf_exempt
def cursor_view(request):
    data = json.loads(request.body)
    row_id = secrets.randbits(62)
    with connection.cursor() as cursor:
        cursor.execute(INSERT, [row_id, data["name"], data["email"], data["subject"], data["message"], data.get("merchantId")])
    return JsonResponse({"id": str(row_id), "status": "SENT"}, status=201)


class InquiryInput(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    email = serializers.EmailField(max_length=254)
    phone = serializers.CharField(max_length=32, required=False, allow_blank=True, default="")
    subject = serializers.CharField(max_length=200)
    message = serializers.CharField(max_length=5000)
    merchantId = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)


NOTIFICATIONS = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
ROOM_CHANNEL = "bench.outreach_bare.inquiries"


@csrf_exempt
def required_work_view(request):
    serializer = InquiryInput(data=json.loads(request.body))
    if not serializer.is_valid():
        return JsonResponse(serializer.errors, status=400)
    inquiry = create_inquiry(serializer.validated_data)
    event = json.dumps({"event": "inquiry.sent", "id": str(inquiry.id), "createdAt": inquiry.created_at.isoformat()})
    with NOTIFICATIONS.pipeline(transaction=False) as pipe:
        pipe.publish(ROOM_CHANNEL, event)
        pipe.publish(f"{ROOM_CHANNEL}.merchant.{inquiry.merchant_id}", event)
        pipe.execute()
    return JsonResponse({"id": str(inquiry.id), "status": inquiry.status}, status=201)


def healthz_view(request):
    return JsonResponse({"status": "ok"})


urlpatterns = [path("healthz", healthz_view), path("orm", orm_view), path("insert", cursor_view), path("required", required_work_view)]
