"""The client endpoints (spec 4.8): readiness (public) and the connected clients of every replica
(JWT plus a WebSocketClient.* permission), fed by real /stream sockets on two replicas."""

from __future__ import annotations

import json
import time

import pytest
import redis
from django.conf import settings

from apps.signal.presence import REPLICAS_KEY
from tests.signal.conftest import stream_client
from tests.support.auth import make_caller
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

STATUS = "/v1/api/signal/socket/websocket/clients/status"
CLIENTS = "/v1/api/signal/socket/websocket/clients"


def test_status_is_public_and_reports_readiness(client):
    response = client.get(STATUS)

    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is True and body["requireEncryption"] is True
    assert set(body) == {"ready", "requireEncryption", "replicas", "connections"}


def test_listing_clients_needs_the_websocket_client_permission(client):
    assert client.get(CLIENTS).status_code == 401
    assert make_caller().client().get(CLIENTS).status_code == 403
    assert make_caller(roles=[("ADMIN", 5)]).client().get(CLIENTS).status_code == 403  # a merchant's admin: not platform-wide
    assert make_caller(permissions=["WebSocketClient.*"]).client().get(CLIENTS).status_code == 200
    assert make_caller(permissions=["WebSocketClient.list"]).client().get(CLIENTS).status_code == 200
    assert make_caller(roles=["ADMIN"]).client().get(CLIENTS).status_code == 200


def test_clients_of_both_replicas_are_listed_with_rooms_and_never_keys(stream_servers):
    first, second = stream_servers(2)
    operator = make_caller(permissions=["WebSocketClient.list"]).client()
    alice, bob = make_caller(merchants=[880]), make_caller()
    with stream_client(first, alice.token) as a, stream_client(second, bob.token) as b:
        a.subscribe("merchant.880")
        b.receive()

        def listed():
            rows = operator.get(CLIENTS).json()
            return {row["subjectId"]: row for row in rows if row["subjectId"] in (str(alice.user_id), str(bob.user_id))}

        rows = wait_for(lambda: (found := listed()) and len(found) == 2 and found, message="both clients listed")
        assert rows[str(alice.user_id)]["rooms"] == ["merchant.880", f"user.{alice.user_id}"]
        assert rows[str(bob.user_id)]["rooms"] == [f"user.{bob.user_id}"]
        assert rows[str(alice.user_id)]["replica"] != rows[str(bob.user_id)]["replica"]
        assert rows[str(alice.user_id)]["sessionId"] == a.connected["sessionId"]
        for row in rows.values():
            assert set(row) == {"sessionId", "replica", "subjectId", "rooms", "connectedAt"}
        status = operator.get(STATUS).json()
        assert status["replicas"] >= 2 and status["connections"] >= 2
    wait_for(lambda: not listed(), message="disconnected clients leave the list")


def test_status_is_503_when_redis_does_not_answer(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get(STATUS)

    assert response.status_code == 503 and response.json()["ready"] is False


def test_a_replica_that_stopped_beating_drops_out_of_the_list(client):
    store = redis.Redis.from_url(settings.REDIS_URL)
    store.zadd(REPLICAS_KEY, {"gone:1": time.time() - 120})
    store.hset(
        "signal:clients:gone:1",
        "s1",
        json.dumps({"sessionId": "s1", "replica": "gone:1", "subjectId": "1", "rooms": [], "connectedAt": "2026-01-01T00:00:00+00:00"}),
    )
    try:
        rows = make_caller(roles=["ADMIN"]).client().get(CLIENTS).json()
        assert "s1" not in {row["sessionId"] for row in rows}
    finally:
        store.delete("signal:clients:gone:1")
        store.zrem(REPLICAS_KEY, "gone:1")
