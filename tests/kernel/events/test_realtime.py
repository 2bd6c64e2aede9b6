"""WebSocket fan-out through the shared Redis: two ASGI server processes; an event sent through one
(or from any other process, through merchant_platform.realtime) reaches clients on both. Sync sends
go through the process's publisher thread: batched, never blocking the sender, delivered at exit."""

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from websockets.sync.client import connect

from merchant_platform import realtime
from merchant_platform.context import bind_request_id, reset_request_id
from merchant_platform.realtime import broadcast, broadcast_many, group_name, room_message
from tests.support.broker import unique
from tests.support.logs import LogCapture
from tests.support.ports import free_port, free_ports
from tests.support.waiting import wait_for

PORTS = range(18100, 18200)  # the realtime servers of these tests


def answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def receive_event(ws, event: str, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = json.loads(ws.recv(timeout=max(0.05, deadline - time.monotonic())))
        if message.get("event") == event:
            return message
    raise AssertionError(f"no {event} event within {timeout} s")


@pytest.fixture
def two_servers(spawn, subprocess_env):
    ports = free_ports(2, within=PORTS)
    for port in ports:
        spawn(
            "-m",
            "uvicorn",
            "tests.kernel.events.asgi:application",
            "--host",
            "127.0.0.1",
            f"--port={port}",
            "--ws",
            "websockets",
            "--log-level",
            "warning",
            env=subprocess_env(),
            name=f"asgi-{port}",
        )
    for port in ports:
        wait_for(lambda port=port: answers(port), timeout=60, message=f"ASGI server on {port}")
    return ports


@pytest.mark.django_db(transaction=True)  # broadcast() waits for the commit of `default` (none here: at once)
def test_event_sent_through_one_server_reaches_a_client_of_the_other(two_servers):
    room = unique("room")
    first_port, second_port = two_servers
    with (
        connect(f"ws://127.0.0.1:{first_port}/test-room/{room}") as first,
        connect(f"ws://127.0.0.1:{second_port}/test-room/{room}") as second,
    ):
        first_server = json.loads(first.recv(timeout=10))["server"]
        second_server = json.loads(second.recv(timeout=10))["server"]
        assert first_server != second_server
        first.send(json.dumps({"event": "order.paid", "payload": {"orderId": "42"}}))
        message = receive_event(second, "order.paid")
        assert message["payload"] == {"orderId": "42"} and message["server"] == second_server
        # From a third process (this test, a service's sync code) through the kernel helper.
        broadcast(room, "stock.changed", {"sku": "A-1"})
        assert receive_event(first, "stock.changed")["payload"] == {"sku": "A-1"}
        assert receive_event(second, "stock.changed")["payload"] == {"sku": "A-1"}


@pytest.mark.django_db(transaction=True)
def test_one_send_to_several_rooms_reaches_each_room_s_clients(two_servers):
    plain, odd = unique("room"), unique("orders:42")  # the second needs a hashed group name
    first_port, second_port = two_servers
    with (
        connect(f"ws://127.0.0.1:{first_port}/test-room/{plain}") as first,
        connect(f"ws://127.0.0.1:{second_port}/test-room/{odd}") as second,
    ):
        first.recv(timeout=10), second.recv(timeout=10)
        broadcast_many([plain, odd], "stock.changed", {"sku": "A-2"})
        assert receive_event(first, "stock.changed")["payload"] == {"sku": "A-2"}
        assert receive_event(second, "stock.changed")["payload"] == {"sku": "A-2"}


def _published(action, groups: list[str], count: int) -> list[tuple[bytes, bytes]]:
    """What `action` PUBLISHes on the channel layer's Redis to the channels of `groups`."""
    subscriber = redis.Redis.from_url(settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0])
    pubsub = subscriber.pubsub()
    pubsub.psubscribe(*(f"*__group__{group}" for group in groups))
    confirmed = 0
    while confirmed < len(groups):  # Redis has confirmed each subscription: nothing published later is missed
        message = pubsub.get_message(timeout=5)
        assert message is not None, "no subscription confirmation"
        confirmed += message["type"] == "psubscribe"
    action()
    received = []
    deadline = time.monotonic() + 5
    while len(received) < count and time.monotonic() < deadline:
        if (message := pubsub.get_message(timeout=0.1)) and message["type"] == "pmessage":
            received.append((message["channel"], message["data"]))
    pubsub.close()
    subscriber.close()
    return received


@pytest.mark.django_db(transaction=True)
def test_a_send_to_several_rooms_publishes_what_channels_group_send_publishes():
    rooms = [unique("room"), unique("orders/7 é")]
    groups = [group_name(room) for room in rooms]
    layer = get_channel_layer()
    token = bind_request_id("req-many")
    try:
        ours = _published(lambda: broadcast_many(rooms, "stock.changed", {"sku": "A-3"}), groups, 2)

        def group_sends():
            for room in rooms:
                async_to_sync(layer.group_send)(group_name(room), room_message(room, "stock.changed", {"sku": "A-3"}))

        theirs = _published(group_sends, groups, 2)
    finally:
        reset_request_id(token)

    def without_id(published):  # each publication has its own id
        return sorted((channel, {**layer.deserialize(data), "id": None}) for channel, data in published)

    assert len(ours) == 2 and without_id(ours) == without_id(theirs)
    assert len({layer.deserialize(data)["id"] for _, data in ours + theirs}) == 4
    assert {layer.deserialize(data)["room"] for _, data in ours} == set(rooms)
    assert all(layer.deserialize(data)["requestId"] == "req-many" for _, data in ours)


@pytest.mark.django_db(transaction=True)
def test_a_send_redis_refuses_is_logged_and_never_raised(monkeypatch, capsys):
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    monkeypatch.setattr(realtime, "_sync_publishers", lambda layer: ([dead], "asgi"))
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)
    token = bind_request_id("req-refused")
    try:
        broadcast_many(["room-a", "room-b"], "stock.changed", {"sku": "A-4"})
        broadcast("room-c", "stock.changed", {"sku": "A-4"})
        assert realtime.flush(timeout=10)
    finally:
        reset_request_id(token)
        logging.getLogger().removeHandler(capture.handler)
    # One line per lost send, even when both went in one batch, naming the request that sent it.
    assert len(capture.matching("realtime.send_failed", "room='room-a,room-b'", "wsEvent='stock.changed'", "requestId='req-refused'")) == 1
    assert len(capture.matching("realtime.send_failed", "room='room-c'")) == 1


@pytest.mark.django_db(transaction=True)
def test_a_stalled_redis_holds_up_the_notifications_not_the_sender(monkeypatch, capsys):
    with socket.socket() as stalled:  # accepts connections (the backlog) and never answers
        stalled.bind(("127.0.0.1", 0))
        stalled.listen(8)
        client = realtime.publisher_client({"address": f"redis://127.0.0.1:{stalled.getsockname()[1]}"})  # the real timeouts
        monkeypatch.setattr(realtime, "_sync_publishers", lambda layer: ([client], "asgi"))
        capture = LogCapture(capsys)
        logging.getLogger().addHandler(capture.handler)
        try:
            broadcast("room-stalled", "stock.changed", {"sku": "A-5"})  # returns while Redis hangs
            assert not realtime.flush(timeout=0.3), "the send should still be waiting for Redis"
            assert realtime.flush(timeout=20)
        finally:
            logging.getLogger().removeHandler(capture.handler)
    assert len(capture.matching("realtime.send_failed", "room='room-stalled'")) == 1


@pytest.mark.django_db(transaction=True)
def test_a_connection_redis_closed_between_batches_is_replaced_and_the_send_still_arrives(capsys):
    room = unique("room")
    admin = redis.Redis.from_url(settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0])
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)
    try:
        broadcast(unique("room"), "stock.changed", {})
        assert realtime.flush(timeout=10)  # the publisher now holds a pooled connection
        killed = [client["id"] for client in admin.client_list() if client["cmd"] == "publish"]
        assert killed and all(admin.client_kill_filter(_id=client_id) for client_id in killed)

        def send_and_flush():
            broadcast(room, "stock.changed", {"sku": "A-6"})
            assert realtime.flush(timeout=10)

        received = _published(send_and_flush, [group_name(room)], 1)
    finally:
        logging.getLogger().removeHandler(capture.handler)
        admin.close()
    assert len(received) == 1  # the pool saw the closed connection and opened another; sent once
    assert not capture.matching("realtime.send_failed")


@pytest.mark.django_db(transaction=True)
def test_a_batch_whose_write_fails_once_is_sent_again_with_the_client_s_retry(monkeypatch, capsys):
    room = unique("room")
    send_packed_command = redis.connection.Connection.send_packed_command
    failures = []

    def fail_once(connection, command, check_health=True):
        if not failures and b"PUBLISH" in b"".join(command):  # the batch's write, not the connection's handshake
            failures.append(connection)
            connection.disconnect()
            raise redis.exceptions.ConnectionError("injected: the connection broke during the write")
        return send_packed_command(connection, command, check_health)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", fail_once)
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)

    def send_and_flush():
        broadcast(room, "stock.changed", {"sku": "A-7"})
        assert realtime.flush(timeout=10)

    try:
        received = _published(send_and_flush, [group_name(room)], 1)
    finally:
        logging.getLogger().removeHandler(capture.handler)
    assert len(failures) == 1 and len(received) == 1
    assert not capture.matching("realtime.send_failed")


@pytest.mark.django_db(transaction=True)
def test_sends_that_gather_while_the_publisher_sleeps_share_one_round_trip(monkeypatch):
    rooms = [unique("room") for _ in range(3)]
    publisher = realtime.Publisher(interval=0.3, capacity=10)
    batches = []
    publish = realtime._publish
    monkeypatch.setattr(realtime, "_publish", lambda sends: batches.append(len(sends)) or publish(sends))

    def send_three():
        for number, room in enumerate(rooms):
            publisher.send([(group_name(room), room_message(room, "stock.changed", {"n": number}))])
        assert publisher.flush(timeout=10)

    received = _published(send_three, [group_name(room) for room in rooms], 3)
    assert batches == [3]
    layer = get_channel_layer()
    assert [layer.deserialize(data)["payload"]["n"] for _, data in received] == [0, 1, 2]  # in order


@pytest.mark.django_db(transaction=True)
def test_flush_does_not_wait_for_the_interval():
    room = unique("room")
    publisher = realtime.Publisher(interval=60, capacity=10)

    def send_and_flush():
        publisher.send([(group_name(room), room_message(room, "stock.changed", {}))])
        assert publisher.flush(timeout=5)

    assert len(_published(send_and_flush, [group_name(room)], 1)) == 1


@pytest.mark.django_db(transaction=True)
def test_a_send_that_finds_the_queue_full_is_dropped_and_logged(capsys):
    publisher = realtime.Publisher(interval=0.5, capacity=1)
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)
    try:
        for number in range(3):  # the thread holds at most one while it sleeps, the queue one more
            publisher.send([(group_name("room-full"), room_message("room-full", "stock.changed", {"n": number}))])
        assert publisher.flush(timeout=10)
    finally:
        logging.getLogger().removeHandler(capture.handler)
    dropped = capture.matching("realtime.send_dropped", "room='room-full'", "wsEvent='stock.changed'", "1 sends are already waiting")
    assert 1 <= len(dropped) <= 2


@pytest.mark.django_db(transaction=True)
def test_a_forked_child_starts_its_own_publisher():
    broadcast(unique("room"), "stock.changed", {})
    assert realtime.flush(timeout=10) and realtime._publisher is not None
    child = os.fork()
    if child == 0:
        os._exit(0 if realtime._publisher is None else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_process_that_sends_and_exits_at_once_still_delivers(subprocess_env):
    room = unique("room")
    script = f"import django; django.setup(); from merchant_platform.realtime import broadcast; broadcast({room!r}, 'job.done', {{}})"

    def run_and_exit():
        subprocess.run([sys.executable, "-c", script], env=subprocess_env(), check=True, timeout=60)

    (received,) = _published(run_and_exit, [group_name(room)], 1)
    assert get_channel_layer().deserialize(received[1])["event"] == "job.done"


@pytest.mark.parametrize(("interval", "size"), [("-1", "10"), ("0.005", "0")])
def test_a_publisher_setting_out_of_range_stops_the_process(subprocess_env, interval, size):
    env = subprocess_env(REALTIME_PUBLISH_INTERVAL_SECONDS=interval, REALTIME_PUBLISH_QUEUE_SIZE=size)
    command = [sys.executable, "-c", "import django; django.setup()"]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode != 0
    assert "REALTIME_PUBLISH_QUEUE_SIZE >= 1" in completed.stderr and f"got {float(interval)} and {size}" in completed.stderr


def test_a_send_that_gets_no_thread_is_logged_and_never_raised(monkeypatch, capsys):
    def refuse(thread):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    publisher = realtime.Publisher(interval=0, capacity=10)
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)
    try:
        publisher.send([(group_name("room-late"), room_message("room-late", "stock.changed", {}))])
    finally:
        logging.getLogger().removeHandler(capture.handler)
    assert len(capture.matching("realtime.send_failed", "room='room-late'", "RuntimeError", "at interpreter shutdown")) == 1
    monkeypatch.undo()  # threads again: the next send starts the publisher and is delivered
    room = unique("room")

    def send_and_flush():
        publisher.send([(group_name(room), room_message(room, "stock.changed", {}))])
        assert publisher.flush(timeout=5)

    assert len(_published(send_and_flush, [group_name(room)], 1)) == 1
