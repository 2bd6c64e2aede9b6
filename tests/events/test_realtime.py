"""WebSocket fan-out through the shared Redis: two ASGI server processes; an event sent through one
(or from any other process, through merchant_platform.realtime) reaches clients on both."""

import json
import socket
import time

import pytest
from websockets.sync.client import connect

from merchant_platform.realtime import broadcast
from tests.events.conftest import unique, wait_for

PORTS = range(18100, 18200)


def free_ports(count: int) -> list[int]:
    found = []
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError("no free port in 18100-18199")


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
    ports = free_ports(2)
    for port in ports:
        spawn(
            "-m",
            "uvicorn",
            "tests.events.asgi:application",
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
