"""The `signal.activity-notification` consumer on the real broker (spec 6.2): a message stores a
notification and pushes it with topic, room and recipientId; a redelivery stores and pushes nothing
twice (the spec has no de-duplication); a value no retry can fix is parked at once, and so is one
naming a room its recipient may not join (the room rules of /stream)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from apps.signal.consumers import ACTIVITY_CONSUMER, activity_notification
from apps.signal.models import Notification, ProcessedMessage
from apps.signal.services import RoomForbidden, notification_store, user_room
from merchant_platform import policy
from merchant_platform.messaging.registry import registered_consumers
from merchant_platform.realtime import group_name
from tests.support.auth import grant, random_user_id
from tests.support.broker import committed_offsets, produce, read_topic, unique
from tests.support.consumers import RunningConsumer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def test_the_consumer_is_registered_on_the_spec_topic_in_signal_s_group():
    (spec,) = registered_consumers(names={ACTIVITY_CONSUMER})
    # With a scratch platform's prefix and suffix (KAFKA_TOPIC_PREFIX, KAFKA_CONSUMER_GROUP_SUFFIX) around the spec's names.
    assert spec.topics == (f"{settings.KAFKA_TOPIC_PREFIX}signal.activity-notification",)
    assert (
        spec.group_id == f"SVC-00090-SIGNAL_CONSUMER_GROUP{settings.KAFKA_CONSUMER_GROUP_SUFFIX.replace('{consumer}', ACTIVITY_CONSUMER)}"
    )
    assert spec.alias == "signal" and spec.idempotent and spec.handler is activity_notification


def listen(rooms: list[str], action, count: int, timeout: float = 15.0) -> list[dict]:
    """What the rooms' Channels groups receive while `action` runs (as a /stream replica would)."""
    layer = get_channel_layer()

    async def scenario():
        channel = await layer.new_channel()
        for room in rooms:
            await layer.group_add(group_name(room), channel)
        try:
            await asyncio.get_running_loop().run_in_executor(None, action)
            received = []
            # One more than expected: nothing extra may come, so the wait for it ends in a timeout.
            with contextlib.suppress(TimeoutError):
                while len(received) < count + 1:
                    received.append(await asyncio.wait_for(layer.receive(channel), timeout=timeout if len(received) < count else 1.5))
            return received
        finally:
            for room in rooms:
                await layer.group_discard(group_name(room), channel)

    return async_to_sync(scenario)()


def test_a_message_is_stored_and_pushed_to_the_recipient_and_the_room(make_topic, raw_producer):
    topic, recipient = make_topic(), 7_000_000 + uuid.uuid4().int % 1_000_000
    grant(recipient, merchants=[5])  # a member of merchant 5 may join its notification rooms
    room = unique("merchant.5.orders")
    value = {
        "recipientId": str(recipient),
        "topic": "order.paid",
        "room": room,
        "title": "Paid",
        "body": "Order 7",
        "data": {"orderId": "7"},
    }
    runner = RunningConsumer.registered(ACTIVITY_CONSUMER, topic)

    def act():
        produce(raw_producer, topic, [value], headers={"messageId": "m-1-" + topic})
        wait_for(lambda: Notification.objects.filter(recipient_id=recipient).exists(), message="the notification row")

    try:
        received = listen([user_room(recipient), room], act, count=2)
    finally:
        runner.finish()
    notification = Notification.objects.get(recipient_id=recipient)
    assert (notification.topic, notification.room, notification.title, notification.body, notification.data) == (
        "order.paid",
        room,
        "Paid",
        "Order 7",
        {"orderId": "7"},
    )
    assert notification.message_id == "m-1-" + topic
    assert sorted(message["room"] for message in received) == sorted([user_room(recipient), room])
    for message in received:
        assert message["event"] == "notification"
        payload = message["payload"]
        assert (payload["id"], payload["topic"], payload["room"], payload["recipientId"]) == (
            str(notification.id),
            "order.paid",
            room,
            str(recipient),
        )


def test_a_redelivered_or_republished_message_stores_and_pushes_nothing_twice(make_topic, raw_producer):
    """Three messages with a producer id (one published twice), two without; then the whole topic
    again in a fresh group, as after a lost offset commit."""
    topic, recipient = make_topic(), 8_000_000 + uuid.uuid4().int % 1_000_000
    value = {"recipientId": str(recipient), "topic": "stock.low"}
    first = RunningConsumer.registered(ACTIVITY_CONSUMER, topic)

    def act():
        for n in range(3):
            produce(raw_producer, topic, [{**value, "data": {"n": n}}], headers={"messageId": f"{topic}-{n}"})
        produce(raw_producer, topic, [{**value, "data": {"n": 2}}], headers={"messageId": f"{topic}-2"})  # the relay's duplicate
        produce(raw_producer, topic, [{**value, "data": {"n": 3}}, {**value, "data": {"n": 4}}])  # no id: topic/partition/offset
        wait_for(lambda: ProcessedMessage.objects.filter(consumer=ACTIVITY_CONSUMER).count() >= 5, message="5 messages")

    try:
        received = listen([user_room(recipient)], act, count=5)
    finally:
        first.finish()
    assert sorted(message["payload"]["data"]["n"] for message in received) == [0, 1, 2, 3, 4]

    again = RunningConsumer.registered(ACTIVITY_CONSUMER, topic)  # a fresh group: every record is delivered again

    def redeliver():
        wait_for(lambda: again.thread.is_alive() and _consumed_everything(topic, again.spec.group_id), message="the redelivery")

    try:
        repeated = listen([user_room(recipient)], redeliver, count=0)
    finally:
        again.finish()
    assert repeated == []
    assert sorted(n.data["n"] for n in Notification.objects.filter(recipient_id=recipient)) == [0, 1, 2, 3, 4]


def _consumed_everything(topic: str, group: str) -> bool:
    return sum(offset or 0 for offset in committed_offsets(group, topic).values()) == 6


def test_the_unique_message_id_refuses_a_second_row_even_outside_the_runner():
    recipient = 9_000_000 + uuid.uuid4().int % 1_000_000
    assert notification_store(recipient_id=recipient, topic="t", message_id="same") is not None
    assert notification_store(recipient_id=recipient, topic="t", message_id="same") is None
    assert Notification.objects.filter(recipient_id=recipient).count() == 1


@pytest.mark.parametrize(
    "value",
    [
        {"topic": "order.paid"},  # no recipient
        {"recipientId": "abc", "topic": "order.paid"},
        {"recipientId": "1", "topic": "order.paid", "room": "bad room"},
        {"recipientId": "1", "topic": "order.paid", "surprise": 1},
        ["not", "an", "object"],
    ],
)
def test_an_invalid_value_is_parked_at_once_and_the_next_message_flows(make_topic, raw_producer, value):
    topic, recipient = make_topic(partitions=1), 6_000_000 + uuid.uuid4().int % 1_000_000
    runner = RunningConsumer.registered(ACTIVITY_CONSUMER, topic)
    try:
        produce(raw_producer, topic, [value, {"recipientId": str(recipient), "topic": "after"}])
        wait_for(lambda: Notification.objects.filter(recipient_id=recipient).exists(), message="the next message")
    finally:
        runner.finish()
    (parked,) = read_topic(f"{topic}.DLQ", expected=1)
    assert json.loads(parked.value) == value
    headers = {name: raw.decode() for name, raw in parked.headers}
    assert headers["dlq.attempts"] == "1" and "invalid activity notification" in headers["dlq.error"]


def test_a_room_the_recipient_may_not_join_is_parked_with_the_reason_and_nothing_is_stored_or_pushed(make_topic, raw_producer):
    """The hostile-tenant case: a member of merchant M (no role there) named with rooms of another
    merchant, a record room of M it may not read, another user's room, the platform's outreach room
    and a room no rule names. Each is parked at once naming the room; the next message flows."""
    topic, merchant, other_merchant = make_topic(partitions=1), 300_000 + uuid.uuid4().int % 100_000, 500_000
    recipient, other_user = random_user_id(), random_user_id()
    grant(recipient, merchants=[merchant])
    refused = [
        f"merchant.{other_merchant}",
        f"merchant.{other_merchant}.orders",
        f"merchant.{merchant}.commerce",
        f"user.{other_user}",
        "outreach.inquiries",
        "anything",
    ]
    hostile = [{"recipientId": str(recipient), "topic": "order.paid", "room": room, "title": "Paid"} for room in refused]
    runner = RunningConsumer.registered(ACTIVITY_CONSUMER, topic)

    def act():
        produce(raw_producer, topic, [*hostile, {"recipientId": str(recipient), "topic": "after"}])
        wait_for(lambda: Notification.objects.filter(recipient_id=recipient).exists(), message="the next message")

    try:
        received = listen([user_room(recipient), *refused], act, count=1)
    finally:
        runner.finish()
    assert [(m["room"], m["payload"]["topic"]) for m in received] == [(user_room(recipient), "after")]
    assert list(Notification.all_objects.filter(recipient_id=recipient).values_list("topic", "room")) == [("after", "")]
    parked = read_topic(f"{topic}.DLQ", expected=len(refused))
    assert [json.loads(record.value) for record in parked] == hostile
    for record, room in zip(parked, refused, strict=True):
        headers = {name: raw.decode() for name, raw in record.headers}
        assert headers["dlq.attempts"] == "1"
        assert "ROOM_FORBIDDEN" in headers["dlq.error"] and repr(room) in headers["dlq.error"]


def test_the_store_refuses_a_room_as_the_socket_would_and_follows_a_revoked_membership():
    recipient, merchant = random_user_id(), 400_000 + uuid.uuid4().int % 100_000
    room = f"merchant.{merchant}"
    with pytest.raises(RoomForbidden) as refused:
        notification_store(recipient_id=recipient, topic="t", room=room)
    assert (refused.value.status_code, refused.value.code, refused.value.extra) == (403, "ROOM_FORBIDDEN", {"room": room})
    assert not Notification.all_objects.filter(recipient_id=recipient).exists()

    grant(recipient, merchants=[merchant])
    assert notification_store(recipient_id=recipient, topic="t", room=room).room == room
    assert notification_store(recipient_id=recipient, topic="t", room=user_room(recipient)) is not None

    policy.policy_revoke_user(user_id=recipient, domain=merchant)
    with pytest.raises(RoomForbidden):
        notification_store(recipient_id=recipient, topic="t", room=room)
    assert Notification.all_objects.filter(recipient_id=recipient).count() == 2
