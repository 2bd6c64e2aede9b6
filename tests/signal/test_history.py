"""Missed messages (issue 18 feature 5, Centrifugo's recovery): each room keeps a bounded, numbered
history in Redis, recorded even while nobody is subscribed; a client reconnecting with the last
offset it saw gets what it missed, or is told the gap is too old."""

from __future__ import annotations

import pytest

from merchant_platform.realtime import broadcast, flush
from tests.signal.conftest import stream_client
from tests.support.auth import make_caller
from tests.support.broker import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def publish(room: str, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        broadcast(room, "tick", {"n": n})
    flush(5)


def test_a_gap_older_than_the_history_is_reported(stream_servers):
    # First in this module: every replica records every room, so no replica with the default
    # size may run next to this one (the module's shared replica starts with the next test).
    (url,) = stream_servers(1, SIGNAL_HISTORY_SIZE="3")
    caller = make_caller(merchants=[911])
    room = unique("merchant.911.orders")
    with stream_client(url, caller.token) as client:
        client.subscribe(room)
        publish(room, 6)
        wait_for(lambda: client.receive_message()["offset"] == 6, message="offset 6")
        assert client.subscribe(room, since=1)["recovered"] is False  # 2 and 3 are gone: only 4-6 are kept
        client.offsets[room] = 3
        assert client.subscribe(room, since=3)["recovered"] is True
        assert [client.receive_message(timeout=5)["offset"] for _ in range(3)] == [4, 5, 6]
        assert client.subscribe(room, since=6) == {"event": "subscribed", "room": room, "offset": 6, "recovered": True}
        assert client.subscribe(room, since=99)["recovered"] is False  # ahead of the room


def test_a_reconnecting_client_gets_what_it_missed_in_order(stream_url):
    caller = make_caller(merchants=[910])
    room = unique("merchant.910.orders")
    with stream_client(stream_url, caller.token) as client:
        client.subscribe(room)
        publish(room, 2)
        assert [client.receive_message()["payload"]["n"] for _ in range(2)] == [0, 1]
        last = client.offsets[room]
    assert last == 2
    publish(room, 3, start=2)  # while the client is away: no socket anywhere is in the room
    with stream_client(stream_url, caller.token) as client:
        client.offsets[room] = last
        reply = client.subscribe(room, since=last)
        assert (reply["recovered"], reply["offset"]) == (True, 5)
        missed = [client.receive_message() for _ in range(3)]
        assert [(m["offset"], m["payload"]["n"]) for m in missed] == [(3, 2), (4, 3), (5, 4)]
        publish(room, 1, start=5)
        assert client.receive_message()["offset"] == 6


def test_two_replicas_number_a_message_once(stream_servers):
    first, second = stream_servers(2)
    caller = make_caller(merchants=[912])
    room = unique("merchant.912.orders")
    with stream_client(first, caller.token) as a, stream_client(second, caller.token) as b:
        a.subscribe(room)
        b.subscribe(room)
        publish(room, 5)
        offsets_a = [a.receive_message()["offset"] for _ in range(5)]
        offsets_b = [b.receive_message()["offset"] for _ in range(5)]
    assert offsets_a == offsets_b == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("since", [-1, "3", 1.5, True])
def test_an_invalid_since_is_an_encrypted_error(stream_url, since):
    caller = make_caller()
    with stream_client(stream_url, caller.token) as client:
        client.receive()
        client.send({"event": "subscribe", "room": f"user.{caller.user_id}", "since": since})
        error = client.receive()
        assert (error["event"], error["code"]) == ("error", "SINCE_INVALID")
