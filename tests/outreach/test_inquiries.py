"""Public inquiry submission: validation, limits, and the notification to the observation rooms."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import redis
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction

from apps.outreach import services
from apps.outreach.models import Inquiry
from apps.outreach.serializers import InquiryReceiptSerializer, inquiry_receipt
from merchant_platform import realtime
from merchant_platform.realtime import group_name
from tests.outreach.conftest import SUBMIT, valid_inquiry
from tests.support.logs import LogCapture
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(databases="__all__")


def submit(client, body, **kwargs):
    return client.post(SUBMIT, body if isinstance(body, str | bytes) else json.dumps(body), content_type="application/json", **kwargs)


def test_submit_is_public_and_stores_a_sent_inquiry(client):
    response = submit(client, valid_inquiry(phone="+44 20 7946 0958", merchantId="123456789"))

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "status", "createdAt"}
    assert body["status"] == "SENT"
    inquiry = Inquiry.objects.get(pk=int(body["id"]))
    assert (inquiry.name, inquiry.email, inquiry.phone, inquiry.merchant_id) == (
        "Ada Lovelace",
        "ada@example.com",
        "+442079460958",
        123456789,
    )
    assert inquiry.message == "Hello,\nwhat are your wholesale prices?"


def test_the_answer_is_what_the_documented_receipt_serializer_gives(client):
    response = submit(client, valid_inquiry(merchantId="123"))

    inquiry = Inquiry.objects.get(pk=int(response.json()["id"]))
    assert response.json() == inquiry_receipt(inquiry) == InquiryReceiptSerializer(inquiry).data


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 121}, "name"),
        ({"name": "Ada\r\nBcc: victim@example.com"}, "name"),
        ({"email": "not-an-address"}, "email"),
        ({"email": "a" * 250 + "@example.com"}, "email"),
        ({"phone": "12345"}, "phone"),
        ({"phone": "+1 555"}, "phone"),
        ({"subject": "s" * 201}, "subject"),
        ({"message": "m" * 5001}, "message"),
        ({"message": "nul \x00 byte"}, "message"),
        ({"message": "lone surrogate \ud800"}, "message"),
        ({"subject": "high surrogate \udbff at the end"}, "subject"),
        ({"merchantId": "abc"}, "merchantId"),
        ({"merchantId": "-5"}, "merchantId"),
        ({"name": 42}, "name"),
        ({"unexpected": "field"}, "unexpected"),
    ],
)
def test_submit_rejects_each_bad_field(client, overrides, field):
    response = submit(client, valid_inquiry(**overrides))

    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "VALIDATION_ERROR"
    assert field in {error["field"] for error in problem["errors"]}
    assert not Inquiry.objects.exists()


@pytest.mark.parametrize("field", ["name", "email", "subject", "message"])
def test_submit_requires_the_mandatory_fields(client, field):
    body = valid_inquiry()
    del body[field]

    response = submit(client, body)

    assert response.status_code == 400
    assert field in {error["field"] for error in response.json()["errors"]}


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        ("{not json", "application/json", 400, "MALFORMED_BODY"),
        ("[1, 2]", "application/json", 400, "VALIDATION_ERROR"),
        ('"text"', "application/json", 400, "VALIDATION_ERROR"),
        ("name=Ada", "application/x-www-form-urlencoded", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ],
)
def test_submit_rejects_malformed_bodies(client, body, content_type, status, code):
    response = client.post(SUBMIT, body, content_type=content_type)

    assert response.status_code == status
    assert response.json()["code"] == code
    assert not Inquiry.objects.exists()


def test_submit_refuses_a_body_over_16_kib_before_reading_it(client):
    response = submit(client, valid_inquiry(message="m" * (17 * 1024)))

    assert response.status_code == 413
    assert response.json()["code"] == "PAYLOAD_TOO_LARGE"
    assert not Inquiry.objects.exists()


def test_submit_accepts_only_post(client):
    assert client.get(SUBMIT).status_code == 405
    assert client.put(SUBMIT, "{}", content_type="application/json").json()["code"] == "METHOD_NOT_ALLOWED"


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_submitted_inquiry_reaches_the_observation_rooms_through_redis(client):
    """Any replica's subscribers get it: the event travels through the shared Redis channel layer."""
    layer = get_channel_layer()

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_name("outreach.inquiries"), channel)
        await layer.group_add(group_name("outreach.inquiries.merchant.777"), channel)
        try:
            response = await sync_to_async(submit)(client, valid_inquiry(merchantId="777"))
            assert response.status_code == 201
            inquiry_id = response.json()["id"]
            received = [await asyncio.wait_for(layer.receive(channel), timeout=5) for _ in range(2)]
        finally:
            await layer.group_discard(group_name("outreach.inquiries"), channel)
            await layer.group_discard(group_name("outreach.inquiries.merchant.777"), channel)
        return inquiry_id, received

    inquiry_id, received = async_to_sync(scenario)()

    assert {message["room"] for message in received} == {"outreach.inquiries", "outreach.inquiries.merchant.777"}
    for message in received:
        assert message["event"] == "inquiry.sent"
        assert message["payload"]["id"] == inquiry_id
        assert message["payload"]["status"] == "SENT"
        assert message["payload"]["merchantId"] == "777"
        # Rooms are open to anyone who connects (spec 5): no personal data in the event.
        assert "ada@example.com" not in json.dumps(message)


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_rejected_inquiry_notifies_nobody(client):
    layer = get_channel_layer()

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_name("outreach.inquiries"), channel)
        try:
            response = await sync_to_async(submit)(client, valid_inquiry(email="bad"))
            assert response.status_code == 400
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(layer.receive(channel), timeout=0.5)
        finally:
            await layer.group_discard(group_name("outreach.inquiries"), channel)

    async_to_sync(scenario)()


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_an_inquiry_stored_in_a_rolled_back_transaction_notifies_nobody():
    layer = get_channel_layer()

    def submit_then_roll_back():
        with pytest.raises(RuntimeError), transaction.atomic(using="outreach"):
            services.inquiry_submit(name="Ada", email="ada@example.com", subject="Hi", message="Hello")
            raise RuntimeError("the caller's transaction fails")

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_name("outreach.inquiries"), channel)
        try:
            await sync_to_async(submit_then_roll_back)()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(layer.receive(channel), timeout=0.5)
        finally:
            await layer.group_discard(group_name("outreach.inquiries"), channel)

    async_to_sync(scenario)()
    assert not Inquiry.all_objects.exists()


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_notification_redis_refuses_does_not_break_the_submit(client, monkeypatch, capsys):
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    monkeypatch.setattr(realtime, "_sync_publishers", lambda layer: ([dead], "asgi"))
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)
    try:
        response = submit(client, valid_inquiry(merchantId="778"))
        assert realtime.flush(timeout=10)
    finally:
        logging.getLogger().removeHandler(capture.handler)

    assert response.status_code == 201
    assert Inquiry.objects.filter(pk=int(response.json()["id"])).exists()
    (line,) = capture.matching("realtime.send_failed", "wsEvent='inquiry.sent'")
    assert "room='outreach.inquiries,outreach.inquiries.merchant.778'" in line
