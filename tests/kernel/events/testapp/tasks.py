"""Celery tasks of the worker tests: they report to Redis (the test reads it back)."""

import json
import os
import time

import redis
from celery import shared_task
from django.conf import settings
from django.db import transaction

from merchant_platform.context import current_request_id
from merchant_platform.messaging import publish
from merchant_platform.realtime import broadcast
from tests.kernel.events.testapp.models import Order


def _redis():
    return redis.Redis.from_url(settings.REDIS_URL)


@shared_task(name="events_test.record")
def record(key: str) -> str:
    _redis().rpush(key, json.dumps({"requestId": current_request_id(), "pid": os.getpid()}))
    return "ok"


@shared_task(name="events_test.slow")
def slow(key: str, seconds: float) -> str:
    """The first run sleeps `seconds` (long enough to be killed); later runs finish at once."""
    client = _redis()
    starts = client.incr(f"{key}:starts")
    client.rpush(f"{key}:pids", os.getpid())
    if starts == 1:
        time.sleep(seconds)
    client.incr(f"{key}:finished")
    return "done"


@shared_task(name="events_test.announce")
def announce(room: str) -> int:
    """Send to `room` and return the pool process's pid: the send waits in its publisher thread."""
    broadcast(room, "job.done", {"pid": os.getpid()})
    return os.getpid()


@shared_task(name="events_test.publish")
def publish_order(topic: str, reference: str) -> str:
    """Commit an order and its event (an outbox row): the commit's relay sends it."""
    with transaction.atomic(using="default"):
        order = Order.objects.create(reference=reference)
        publish(topic, {"reference": reference}, event_type="order.created", key=order.id, using="default")
    return reference
