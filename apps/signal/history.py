"""Each room's recent messages in the shared Redis, numbered, so a client that reconnects gets what
it missed (Centrifugo's history and recovery; beyond the spec).

Each replica's recorder listens to every room (a pattern subscription on the channel layer's
Redis), so a room's history grows while nobody is subscribed to it, e.g. while its only client
reconnects. The first replica to run the script for a message id numbers it (the room's next
offset) and appends it to the room's list; the others get that same offset back. Within one replica
the recorder and the room's sockets share one script run per message, and a replica numbers a
room's messages one after the other, so offsets follow the publication order. The list keeps
SIGNAL_HISTORY_SIZE messages and expires SIGNAL_HISTORY_TTL_SECONDS after the last one; the offset
counter lives 30 days past the last message, so offsets of a room never go back while a client
could still remember one.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict

import redis.asyncio
from channels.layers import get_channel_layer
from django.conf import settings

from merchant_platform.logging import get_logger
from merchant_platform.realtime import ROOM_MESSAGE_TYPE

log = get_logger(__name__)

COUNTER_TTL_SECONDS = 30 * 24 * 3600
_MEMO_SIZE = 10_000

# KEYS: seen-id key, offset counter, list. ARGV: entry JSON, size, ttl, counter ttl.
# Returns the message's offset (the existing one when the id was numbered before).
_RECORD = """
local seen = redis.call('GET', KEYS[1])
if seen then return tonumber(seen) end
local offset = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('SET', KEYS[1], offset, 'EX', ARGV[3])
redis.call('RPUSH', KEYS[3], offset .. ' ' .. ARGV[1])
redis.call('LTRIM', KEYS[3], -tonumber(ARGV[2]), -1)
redis.call('EXPIRE', KEYS[3], ARGV[3])
return offset
"""


def _keys(room: str) -> tuple[str, str]:
    tag = "{" + room + "}"  # one hash slot per room (Redis Cluster)
    return f"signal:history:{tag}:offset", f"signal:history:{tag}:list"


class History:
    """One per event loop (the ASGI server has one)."""

    def __init__(self):
        self.redis = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        self.script = self.redis.register_script(_RECORD)
        self.memo: OrderedDict[str, asyncio.Future] = OrderedDict()
        self.recorder: asyncio.Task | None = None

    async def record(self, message: dict) -> int | None:
        """The offset of a room message (numbering it on first sight); None without history or
        when Redis fails (logged: the message is still delivered, without an offset)."""
        if settings.SIGNAL_HISTORY_SIZE <= 0 or not message.get("id"):
            return None
        known = self.memo.get(message["id"])
        if known is None:
            known = self.memo[message["id"]] = asyncio.get_running_loop().create_task(self._record(message))
            while len(self.memo) > _MEMO_SIZE:
                self.memo.popitem(last=False)
        return await asyncio.shield(known)

    async def _record(self, message: dict) -> int | None:
        counter, entries = _keys(message["room"])
        entry = json.dumps({"name": message["event"], "payload": message["payload"]}, separators=(",", ":"))
        ttl = settings.SIGNAL_HISTORY_TTL_SECONDS
        try:
            return int(
                await self.script(
                    keys=[f"signal:history:seen:{message['id']}", counter, entries],
                    args=[entry, settings.SIGNAL_HISTORY_SIZE, ttl, max(ttl, COUNTER_TTL_SECONDS)],
                )
            )
        except Exception as exc:
            log.warning("stream.history_failed", room=message["room"], error=f"{type(exc).__name__}: {exc}"[:300])
            return None

    async def since(self, room: str, offset: int) -> tuple[int, list[tuple[int, dict]] | None]:
        """The room's latest offset, and its messages after `offset`; None when some of them are no
        longer kept (the gap is too old: the client must reload what it shows) or the offset is
        ahead of the room (a counter that was reset)."""
        counter, entries = _keys(room)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(counter)
            pipe.lrange(entries, 0, -1)
            top, raw = await pipe.execute()
        top = int(top or 0)
        kept = []
        for item in raw:
            number, _, entry = item.decode().partition(" ")
            kept.append((int(number), json.loads(entry)))
        missed = [(number, entry) for number, entry in kept if number > offset]
        oldest = kept[0][0] if kept else top + 1
        complete = offset <= top and (offset >= top or oldest <= offset + 1)
        return top, missed if complete else None

    def start_recorder(self) -> None:
        """Record every room message of the channel layer, from this replica (idempotent)."""
        if settings.SIGNAL_HISTORY_SIZE > 0 and self.recorder is None:
            self.recorder = asyncio.get_running_loop().create_task(self._record_all())

    async def _record_all(self) -> None:
        layer = get_channel_layer()
        config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
        pattern = f"{config.get('prefix', 'asgi')}__group__room.*"
        while True:
            try:
                await asyncio.gather(*(self._record_from(host, pattern, layer) for host in config["hosts"]))
            except Exception as exc:
                log.warning("stream.history_recorder_failed", error=f"{type(exc).__name__}: {exc}"[:300])
                await asyncio.sleep(1)

    async def _record_from(self, host: str, pattern: str, layer) -> None:
        client = redis.asyncio.Redis.from_url(host)
        try:
            async with client.pubsub() as pubsub:
                await pubsub.psubscribe(pattern)
                async for item in pubsub.listen():
                    if item["type"] == "pmessage":
                        message = layer.deserialize(item["data"])
                        if message.get("type") == ROOM_MESSAGE_TYPE:
                            await self.record(message)
        finally:
            await client.aclose()


_history: dict[asyncio.AbstractEventLoop, History] = {}


def history() -> History:
    """This event loop's history, its recorder started."""
    loop = asyncio.get_running_loop()
    if loop not in _history:
        _history[loop] = History()
    _history[loop].start_recorder()
    return _history[loop]
