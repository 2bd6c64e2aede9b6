"""Consumers the subprocess tests run through `manage.py consume`; the test gives the topic, group
and run id in the environment (nothing registers without EVENTS_TEST_TOPIC)."""

import json
import os
import time

import redis
from django.conf import settings
from django.db import transaction

from merchant_platform.messaging import consumer
from tests.kernel.events.testapp.models import Effect, ProcessedMessage

TOPIC = os.environ.get("EVENTS_TEST_TOPIC")


def apply(message) -> None:
    """Record the effect; `sleep` holds the message in hand (its start is noted in Redis first);
    `die_after_commit` kills the process after the database commit, before the offset commit."""
    run = os.environ["EVENTS_TEST_RUN"]
    body = message.value
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.rpush(f"{run}:started", json.dumps(body["n"]))
    if body.get("sleep"):
        time.sleep(body["sleep"])
    Effect.objects.create(run=run, value=str(body["n"]))
    if body.get("die_after_commit"):
        transaction.on_commit(lambda: os._exit(137), using="default")


if TOPIC:
    consumer(
        "events-test.subprocess",
        topics=[TOPIC],
        group_id=os.environ["EVENTS_TEST_GROUP"],
        processed_model=ProcessedMessage,
    )(apply)
