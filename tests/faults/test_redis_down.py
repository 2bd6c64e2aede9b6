"""Redis killed and started again (spec 7), on a Redis of this test's own: while it is down,
identity's OTP answers 503, a token issued before still verifies, outreach's submit still stores the
inquiry (its notification is lost and logged, never raised); once Redis is back, OTP works again and
realtime sends arrive, in the same process, without a restart."""

from __future__ import annotations

import json
import time

import pytest
import redis
from django.conf import settings as django_settings

from apps.outreach.models import Inquiry
from apps.outreach.services import INQUIRY_ROOM
from merchant_platform import realtime
from merchant_platform.policy import cache as policy_cache
from merchant_platform.realtime import group_name
from tests.identity.conftest import API, post, sign_in, sign_up, smtp_server  # noqa: F401
from tests.outreach.conftest import SUBMIT, valid_inquiry
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


@pytest.fixture
def on_private_redis(settings, private_redis):
    """The cache, the OTP store and the channel layer of this process on the private Redis."""
    url = private_redis.url
    settings.REDIS_URL = url
    settings.CACHES = {"default": {**django_settings.CACHES["default"], "LOCATION": url}}
    layer = django_settings.CHANNEL_LAYERS["default"]
    settings.CHANNEL_LAYERS = {"default": {**layer, "CONFIG": {**layer["CONFIG"], "hosts": [url]}}}
    yield private_redis
    realtime.flush(timeout=5)
    policy_cache._cache_state["down_until"] = 0.0


def request_code(client, identifier: str):
    return post(client, "/auth/otp/forgot-password/request", {"identifier": identifier})


def submit(client, **fields):
    return client.post(SUBMIT, json.dumps(valid_inquiry(**fields)), content_type="application/json")


def test_redis_killed_then_restarted(client, smtp_server, on_private_redis, log_lines):  # noqa: F811
    email = "redis-fault@example.com"
    sign_up(client, verified=True, email=email)
    token = sign_in(client, email).json()["accessToken"]
    me = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert request_code(client, email).status_code == 202

    on_private_redis.kill()

    down = request_code(client, email)
    assert (down.status_code, down.json()["code"]) == (503, "OTP_STORE_UNAVAILABLE")
    assert client.get(f"{API}/users/me", **me).status_code == 200  # verification needs no Redis
    stored = submit(client, subject="while Redis is down")
    assert stored.status_code == 201, stored.content
    assert Inquiry.objects.filter(pk=int(stored.json()["id"]), subject="while Redis is down").exists()
    assert realtime.flush(timeout=10)
    assert log_lines.matching("realtime.send_failed", "wsEvent='inquiry.sent'")  # the lost notification is logged

    on_private_redis.start()

    policy_cache._cache_state["down_until"] = 0.0  # the cache's circuit breaker would retry on its own a little later
    assert client.get(f"{API}/users/me", **me).status_code == 200
    # A new code for the same identifier: the cooldown of the first request was in the Redis that died.
    wait_for(lambda: request_code(client, email).status_code == 202, timeout=10, message="OTP back")
    subscriber = redis.Redis.from_url(on_private_redis.url)
    pubsub = subscriber.pubsub()
    pubsub.psubscribe(f"*__group__{group_name(INQUIRY_ROOM)}")
    assert pubsub.get_message(timeout=5)["type"] == "psubscribe"
    after = submit(client, subject="after Redis came back")
    assert after.status_code == 201
    received, deadline = [], time.monotonic() + 10
    while not received and time.monotonic() < deadline:
        if (message := pubsub.get_message(timeout=0.2)) and message["type"] == "pmessage":
            received.append(message["data"])
    pubsub.close()
    subscriber.close()
    assert len(received) == 1 and after.json()["id"].encode() in received[0]  # the realtime send resumed
    assert Inquiry.objects.filter(subject__in=["while Redis is down", "after Redis came back"]).count() == 2
