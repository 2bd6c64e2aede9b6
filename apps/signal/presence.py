"""Who is connected to /stream, per replica, in the shared Redis (spec 4.8's client endpoints).

Each replica keeps a hash `signal:clients:<replica>` (session id -> subject, rooms, connected
since; never a key) and beats in the sorted set `signal:replicas` every HEARTBEAT_SECONDS. A
replica that stopped beating (killed, partitioned) drops out of the listing after TTL_SECONDS, and
its hash expires. Presence is best-effort: a Redis failure is logged and never closes a socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time

import redis.asyncio
from django.conf import settings

from merchant_platform.logging import get_logger

log = get_logger(__name__)

REPLICAS_KEY = "signal:replicas"
HEARTBEAT_SECONDS = 10
TTL_SECONDS = 30
REPLICA = os.environ.get("SIGNAL_REPLICA_ID") or f"{socket.gethostname()}:{os.getpid()}"


def clients_key(replica: str) -> str:
    return f"signal:clients:{replica}"


class Presence:
    """This replica's record of its sockets; one per event loop (the ASGI server has one)."""

    def __init__(self):
        self.redis = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        self.sessions: dict[str, dict] = {}
        self.heartbeat: asyncio.Task | None = None

    async def put(self, entry: dict) -> None:
        """Record or update one socket (`sessionId`, `subjectId`, `rooms`, `connectedAt`)."""
        self.sessions[entry["sessionId"]] = entry
        if self.heartbeat is None:
            self.heartbeat = asyncio.get_running_loop().create_task(self._beat())
        await self._write(lambda pipe: pipe.hset(clients_key(REPLICA), entry["sessionId"], json.dumps({**entry, "replica": REPLICA})))

    async def drop(self, session_id: str) -> None:
        if self.sessions.pop(session_id, None) is not None:
            await self._write(lambda pipe: pipe.hdel(clients_key(REPLICA), session_id))

    async def _write(self, command) -> None:
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                command(pipe)
                pipe.expire(clients_key(REPLICA), TTL_SECONDS)
                pipe.zadd(REPLICAS_KEY, {REPLICA: time.time()})
                await pipe.execute()
        except Exception as exc:
            log.warning("stream.presence_failed", replica=REPLICA, error=f"{type(exc).__name__}: {exc}"[:300])

    async def _beat(self) -> None:
        """Refresh this replica's beat and hash; rewrite the hash from memory (Redis may have lost it)."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            sessions = {session_id: json.dumps({**entry, "replica": REPLICA}) for session_id, entry in self.sessions.items()}

            def refresh(pipe, sessions=sessions):
                pipe.zremrangebyscore(REPLICAS_KEY, "-inf", time.time() - TTL_SECONDS)
                if sessions:
                    pipe.hset(clients_key(REPLICA), mapping=sessions)

            await self._write(refresh)


_presence: dict[asyncio.AbstractEventLoop, Presence] = {}


def presence() -> Presence:
    loop = asyncio.get_running_loop()
    if loop not in _presence:
        _presence[loop] = Presence()
    return _presence[loop]
