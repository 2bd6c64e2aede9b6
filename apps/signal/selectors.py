"""Reads of the signal service: the connected /stream clients of every live replica (presence.py)."""

from __future__ import annotations

import json
import time

import redis
from django.conf import settings

from apps.signal.presence import REPLICAS_KEY, TTL_SECONDS, clients_key


def _client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def live_replicas(client: redis.Redis) -> list[str]:
    return sorted(replica.decode() for replica in client.zrangebyscore(REPLICAS_KEY, time.time() - TTL_SECONDS, "+inf"))


def websocket_status() -> dict:
    """Readiness of the WebSocket side: the Redis that carries room messages to the replicas (the
    channel layer's) and the one holding presence answer. `replicas`: replicas with live sockets."""
    fan_out = redis.Redis.from_url(settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0], socket_timeout=2, socket_connect_timeout=2)
    client = _client()
    try:
        fan_out.ping()
        replicas = live_replicas(client)
        connections = sum(client.hlen(clients_key(replica)) for replica in replicas)
    except redis.RedisError:
        return {"ready": False, "requireEncryption": True, "replicas": 0, "connections": 0}
    finally:
        client.close()
        fan_out.close()
    return {"ready": True, "requireEncryption": True, "replicas": len(replicas), "connections": connections}


def connected_clients() -> list[dict]:
    """Every socket of every live replica, oldest first (no keys are ever recorded)."""
    client = _client()
    try:
        entries = [json.loads(raw) for replica in live_replicas(client) for raw in client.hvals(clients_key(replica))]
    finally:
        client.close()
    return sorted(entries, key=lambda entry: (entry["connectedAt"], entry["sessionId"]))
