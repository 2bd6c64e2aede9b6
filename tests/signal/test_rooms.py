"""Room authorization on /stream (issue 18 feature 4): the spec accepts every room, signal does not.
A refused subscription is an encrypted `error`; the socket stays usable. Also: a notification
published by a Kafka message reaches the recipient's socket, decrypted by the client."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.utils import timezone

from apps.commerce import seeds as commerce_seeds
from apps.finance import seeds as finance_seeds
from apps.ledger import seeds as ledger_seeds
from apps.payment import seeds as payment_seeds
from apps.signal.client import StreamError
from apps.signal.consumers import ACTIVITY_CONSUMER
from merchant_platform import policy, revocation
from merchant_platform.messaging.registry import ConsumerSpec, registered_consumers
from merchant_platform.messaging.runner import ConsumerRunner
from merchant_platform.realtime import broadcast, flush
from tests.signal.conftest import stream_client
from tests.support.auth import make_caller
from tests.support.broker import produce, unique

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def seeds() -> None:
    """The role baselines of the services whose rooms the tests join."""
    for service in (commerce_seeds, ledger_seeds, payment_seeds):
        service.run()


def joins(url: str, caller, room: str) -> bool:
    with stream_client(url, caller.token) as client:
        try:
            client.subscribe(room)
        except StreamError as refused:
            assert (refused.code, refused.room) == ("ROOM_FORBIDDEN", room)
            client.send({"event": "ping"})  # still open and encrypted
            assert client.receive()["event"] in ("pong", "subscribed")
            return False
        return True


def test_a_user_joins_its_own_room_only(stream_url):
    caller, other = make_caller(), make_caller()
    assert joins(stream_url, caller, f"user.{caller.user_id}")
    assert not joins(stream_url, caller, f"user.{other.user_id}")


def test_merchant_rooms_need_a_policy_on_that_merchant(stream_url):
    member, employee, stranger, admin = (
        make_caller(merchants=[501]),
        make_caller(roles=[("EMPLOYEE", 501)]),
        make_caller(merchants=[502]),
        make_caller(roles=["ADMIN"]),
    )
    for room in ("merchant.501", "merchant.501.orders"):
        assert joins(stream_url, member, room)
        assert joins(stream_url, employee, room)
        assert joins(stream_url, admin, room)
        assert not joins(stream_url, stranger, room)


def test_merchant_rooms_that_carry_records_need_read_on_them(stream_url):
    """Payment events, ledger job statuses and sale order moves go to their own rooms: a member
    joins them only with `read` on what they carry there (a CASHIER reads the orders it sells, not
    the payment event feed nor the ledger jobs)."""
    seeds()
    cashier, owner = make_caller(roles=[("CASHIER", 611)]), make_caller(roles=[("OWNER", 611)])
    employee, admin = make_caller(roles=[("EMPLOYEE", 611)]), make_caller(roles=["ADMIN"])
    assert joins(stream_url, cashier, "merchant.611")  # the merchant's notification room
    for room in ("merchant.611.payment", "merchant.611.ledger", "merchant.611.commerce"):
        assert joins(stream_url, cashier, room) is room.endswith(".commerce")
        assert joins(stream_url, owner, room)
        assert joins(stream_url, admin, room)
    assert not joins(stream_url, employee, "merchant.611.payment")  # staff read transactions, not the event feed
    assert joins(stream_url, employee, "merchant.611.ledger")
    assert not joins(stream_url, make_caller(roles=[("OWNER", 612)]), "merchant.611.ledger")


def test_the_finance_room_needs_read_on_vouchers(stream_url):
    """Finance's vouchers go to `merchant.<id>.finance`: its staff read them (CASHIER included), a
    plain member of the merchant or the owner of another one does not."""
    finance_seeds.run()
    member, cashier = make_caller(merchants=[621]), make_caller(roles=[("CASHIER", 621)])
    assert joins(stream_url, member, "merchant.621")
    assert not joins(stream_url, member, "merchant.621.finance")
    assert joins(stream_url, cashier, "merchant.621.finance")
    assert not joins(stream_url, make_caller(roles=[("OWNER", 622)]), "merchant.621.finance")


def test_a_revoked_grant_takes_the_socket_out_of_the_room_within_seconds(stream_url):
    seeds()
    caller = make_caller(roles=[("EMPLOYEE", 621)])
    room = "merchant.621.ledger"
    with stream_client(stream_url, caller.token) as client:
        client.subscribe(room)
        policy.policy_revoke_user(user_id=caller.user_id, domain=621)
        revoked = client.receive(timeout=10)
        assert (revoked["event"], revoked["code"], revoked["room"]) == ("error", "ROOM_REVOKED", room)
        broadcast(room, "ledger.status", {"status": "COMPLETED"})
        flush(5)
        with pytest.raises(TimeoutError):
            client.receive_message(timeout=1)
        client.send({"event": "ping"})  # the socket stays open
        assert client.receive()["event"] == "pong"


def test_a_session_revoked_by_identity_closes_the_socket_within_seconds(stream_url):
    """A password change or deactivation moves the user's "valid after" instant: the socket closes
    (4401 TOKEN_REVOKED) at the next re-check rather than at the token's expiry."""
    caller = make_caller()
    with stream_client(stream_url, caller.token) as client:
        client.receive()  # subscribed to user.<id>
        revocation.tokens_valid_after_move(user_id=caller.user_id, instant=timezone.now())
        with pytest.raises(StreamError) as closed:
            client.receive(timeout=10)
        assert (closed.value.code, closed.value.close_code) == ("TOKEN_REVOKED", 4401)


def test_outreach_rooms_need_the_inquiry_read_permission(stream_url):
    platform_reader = make_caller(permissions=["outreach.Inquiry.read"])
    merchant_reader = make_caller(permissions=[("outreach.Inquiry.read", 77)], merchants=[77])
    member_only = make_caller(merchants=[77])
    assert joins(stream_url, platform_reader, "outreach.inquiries")
    assert not joins(stream_url, merchant_reader, "outreach.inquiries")
    assert joins(stream_url, merchant_reader, "outreach.inquiries.merchant.77")
    assert not joins(stream_url, merchant_reader, "outreach.inquiries.merchant.78")
    assert not joins(stream_url, member_only, "outreach.inquiries.merchant.77")


@pytest.mark.parametrize("room", ["anything", "merchant.x", "ledger.jobs", "user.0"])
def test_rooms_no_rule_names_are_refused_even_to_administrators(stream_url, room):
    assert not joins(stream_url, make_caller(roles=["ADMIN"]), room)


@pytest.mark.parametrize("room", ["", "bad room", "x" * 201, 42, None])
def test_an_invalid_room_name_is_an_encrypted_error(stream_url, room):
    with stream_client(stream_url, make_caller().token) as client:
        client.receive()
        client.send({"event": "subscribe", "room": room})
        error = client.receive()
        assert (error["event"], error["code"]) == ("error", "ROOM_INVALID")


def test_a_revoked_membership_applies_to_the_next_subscription(stream_url):
    caller = make_caller(merchants=[601])
    with stream_client(stream_url, caller.token) as client:
        client.subscribe("merchant.601")
        policy.policy_revoke_user(user_id=caller.user_id, domain=601)
        with pytest.raises(StreamError) as refused:
            client.subscribe("merchant.601.orders")
        assert refused.value.code == "ROOM_FORBIDDEN"


def test_messages_reach_subscribed_rooms_only_and_stop_after_unsubscribe(stream_url):
    caller = make_caller(merchants=[701])
    room, other = unique("merchant.701.a"), unique("merchant.701.b")
    with stream_client(stream_url, caller.token) as client:
        client.subscribe(room)
        broadcast(other, "x", {"n": 0})
        broadcast(room, "x", {"n": 1})
        flush(5)
        assert client.receive_message()["payload"] == {"n": 1}
        client.unsubscribe(room)
        broadcast(room, "x", {"n": 2})
        flush(5)
        with pytest.raises(TimeoutError):
            client.receive_message(timeout=1)


def test_a_kafka_activity_message_arrives_decrypted_on_the_recipient_s_socket(stream_url, make_topic, raw_producer):
    topic, caller = make_topic(), make_caller()
    (registered,) = registered_consumers(names={ACTIVITY_CONSUMER})
    spec = ConsumerSpec(**{**registered.__dict__, "topics": (topic,), "group_id": unique("signal-test")})
    stop = threading.Event()
    runner = threading.Thread(target=ConsumerRunner(spec, stop).run, daemon=True)
    runner.start()
    try:
        with stream_client(stream_url, caller.token) as client:
            client.receive()  # subscribed to user.<id>
            body = f"Order {uuid.uuid4().hex[:6]} was paid."
            produce(raw_producer, topic, [{"recipientId": str(caller.user_id), "topic": "order.paid", "title": "Paid", "body": body}])
            message = client.receive_message(timeout=20)
    finally:
        stop.set()
        runner.join(timeout=30)
    assert (message["room"], message["name"]) == (f"user.{caller.user_id}", "notification")
    payload = message["payload"]
    assert (payload["topic"], payload["recipientId"], payload["body"]) == ("order.paid", str(caller.user_id), body)
