"""WebSocket fan-out through the shared Redis (Channels layer).

Any service, from sync or async code, sends an event to a room; every ASGI process subscribed to
that room (signal's /stream consumers on any replica) receives it. A send tied to a database change
is deferred until that change commits, so a rolled-back write never notifies anyone.

Sync sends are handed to the process's publisher thread, which sends what gathered over
REALTIME_PUBLISH_INTERVAL_SECONDS in one Redis round trip: a request never waits for Redis (a slow
or unreachable Redis delays or loses notifications, never requests), and under load many sends
share one round trip. The order of one process's sends is kept.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import queue
import re
import threading
import uuid
from collections.abc import Iterable
from functools import lru_cache

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import _consistent_hash, decode_hosts
from django.conf import settings
from django.db import transaction
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from merchant_platform.context import current_request_id
from merchant_platform.logging import get_logger

log = get_logger(__name__)
ROOM_MESSAGE_TYPE = "room.event"
_GROUP_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# The publisher's Redis clients give up on a stalled server after one retry instead of blocking its
# thread forever (redis-py's default: no timeout) or for half a minute (its default three retries).
PUBLISH_SOCKET_TIMEOUT_SECONDS = 2.0
PUBLISH_RETRY = Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=1)


def group_name(room: str) -> str:
    """Channels group names are ASCII [A-Za-z0-9._-] under 100 characters; rooms may be anything."""
    safe = _GROUP_UNSAFE.sub("_", room)
    if safe == room and len(room) <= 80:
        return f"room.{room}"
    return f"room.{safe[:40]}.{hashlib.sha256(room.encode()).hexdigest()[:32]}"


def room_message(room: str, event: str, payload: dict) -> dict:
    """`id` names one publication: every signal replica receives it, and the room history records
    it once by this id (docs/services/signal.md)."""
    return {
        "type": ROOM_MESSAGE_TYPE,
        "id": uuid.uuid4().hex,
        "room": room,
        "event": event,
        "payload": payload,
        "requestId": current_request_id(),
    }


@lru_cache(maxsize=4)
def _sync_publishers(layer) -> tuple[list[redis.Redis], str] | None:
    """Pooled synchronous Redis clients for the shards of a pub/sub channel layer, and its prefix."""
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    config = dict(layer._kwargs)
    return [publisher_client(host) for host in decode_hosts(config.get("hosts"))], config.get("prefix", "asgi")


def publisher_client(host: dict) -> redis.Redis:
    """A client for one channel-layer host (channels_redis's decoded form), with the publisher's
    timeouts and retry unless the host sets its own."""
    options = {
        "socket_connect_timeout": PUBLISH_SOCKET_TIMEOUT_SECONDS,
        "socket_timeout": PUBLISH_SOCKET_TIMEOUT_SECONDS,
        "retry": PUBLISH_RETRY,
        **host,
    }
    address = options.pop("address", None)
    return redis.Redis.from_url(address, **options) if address else redis.Redis(**options)


Send = list[tuple[str, dict]]  # one broadcast's (group, message) pairs


def _publish(sends: list[Send]) -> None:
    """From sync code, PUBLISH each (group, message) exactly as channels_redis's pub/sub layer does
    for group_send, over a pooled connection: async_to_sync would start an event loop and open a
    Redis connection per call (about 5 ms of CPU per send, measured for outreach's submit). All the
    messages bound for one Redis shard go in one write (no MULTI): one round trip, not one each.
    Nothing is raised: a failure is logged once per send it lost, with that send's rooms."""
    try:
        layer = get_channel_layer()
        publishers = _sync_publishers(layer)
    except Exception:
        for send in sends:
            _log_failure([message for _, message in send])
        return
    if publishers is None:  # another kind of layer: its own group_send, one message at a time
        for send in sends:
            for group, message in send:
                try:
                    async_to_sync(layer.group_send)(group, message)
                except Exception:
                    _log_failure([message])
        return
    clients, prefix = publishers
    by_shard: dict[int, list[tuple[int, str, dict]]] = {}
    for index, send in enumerate(sends):
        for group, message in send:
            channel = f"{prefix}__group__{group}"
            by_shard.setdefault(_consistent_hash(channel, len(clients)), []).append((index, channel, message))
    for shard, items in by_shard.items():
        try:
            _publish_on(clients[shard], [(channel, layer.serialize(message)) for _, channel, message in items])
        except Exception:
            lost: dict[int, list[dict]] = {}
            for index, _, message in items:
                lost.setdefault(index, []).append(message)
            for messages in lost.values():
                _log_failure(messages)


def _publish_on(client: redis.Redis, channel_messages: list[tuple[str, bytes]]) -> None:
    """PUBLISH each (channel, message) in one write over one of `client`'s pooled connections, then
    read the replies, with the client's retry: what a non-transactional redis-py pipeline sends,
    without building the pipeline's command stack and reply callbacks (half the publisher's CPU).
    A connection that failed mid-way is dropped, so no unread reply is left for the next batch."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        commands = connection.pack_commands([("PUBLISH", channel, message) for channel, message in channel_messages])

        def send_and_read() -> None:
            connection.send_packed_command(commands)
            for _ in channel_messages:
                connection.read_response()

        connection.retry.call_with_retry(send_and_read, lambda _error: connection.disconnect())
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)


def _log_failure(messages: list[dict]) -> None:
    # A notification must never break the write it follows; it is logged with the traceback, and
    # with the requestId of the request that sent it (the publisher thread has none of its own).
    sender = {"requestId": messages[0]["requestId"]} if messages[0]["requestId"] else {}
    log.exception("realtime.send_failed", room=",".join(message["room"] for message in messages), wsEvent=messages[0]["event"], **sender)


class Publisher:
    """The process's publisher thread, started at the first send. Each batch is one `_publish`
    call: one Redis round trip per shard for every send that gathered while the thread slept."""

    def __init__(self, *, interval: float, capacity: int):
        self.interval = interval
        self._queue: queue.Queue[Send | threading.Event] = queue.Queue(maxsize=capacity)
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._hurry = threading.Event()  # set by flush(): publish now instead of after the interval

    def send(self, messages: Send) -> None:
        try:
            if self._thread is None:
                self._start()
            self._queue.put_nowait(messages)
        except RuntimeError:  # no thread to be had (the interpreter is shutting down): lose the send, not the write
            _log_failure([message for _, message in messages])
        except queue.Full:
            log.error(
                "realtime.send_dropped",
                reason=f"{self._queue.maxsize} sends are already waiting for Redis",
                room=",".join(message["room"] for _, message in messages),
                wsEvent=messages[0][1]["event"],
            )

    def flush(self, timeout: float) -> bool:
        """Wait until every send queued before this call was published (or failed and was logged)."""
        if self._thread is None:
            return True
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        self._hurry.set()
        return done.wait(timeout)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="realtime-publisher", daemon=True)
                thread.start()
                self._thread = thread  # only once it runs: a send after a failed start tries again

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if not isinstance(first, threading.Event):
                self._hurry.wait(self.interval)  # let a batch gather: at most one round trip per interval
            self._hurry.clear()
            sends, flushed = [], []
            for item in self._drain(first):
                (flushed if isinstance(item, threading.Event) else sends).append(item)
            try:
                if sends:
                    _publish(sends)
            except Exception:  # _publish logs its own failures; this thread must outlive any other
                log.exception("realtime.publisher_failed", sends=len(sends))
            finally:
                for done in flushed:
                    done.set()

    def _drain(self, first):
        yield first
        while True:
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return


_publisher: Publisher | None = None
_publisher_lock = threading.Lock()


def publisher() -> Publisher:
    global _publisher  # noqa: PLW0603 - one per process, made on first use (settings are read then)
    if _publisher is None:
        with _publisher_lock:
            if _publisher is None:
                _publisher = Publisher(interval=settings.REALTIME_PUBLISH_INTERVAL_SECONDS, capacity=settings.REALTIME_PUBLISH_QUEUE_SIZE)
    return _publisher


def flush(timeout: float = 5.0) -> bool:
    """Publish what this process has queued; False if that took longer than `timeout` seconds.
    Runs at exit, so a management command or task that sends last still delivers."""
    return _publisher is None or _publisher.flush(timeout)


def _forget_publisher_in_child() -> None:
    # A forked child has a copy of the queue but not the thread: it starts its own (and takes a
    # fresh lock, in case another thread held this one at the fork).
    global _publisher, _publisher_lock
    _publisher, _publisher_lock = None, threading.Lock()


atexit.register(flush)
os.register_at_fork(after_in_child=_forget_publisher_in_child)


def broadcast(room: str, event: str, payload: dict, *, using: str | None = None) -> None:
    """Send `event` to `room` once the current transaction on `using` commits (now if none)."""
    broadcast_many((room,), event, payload, using=using)


def broadcast_many(rooms: Iterable[str], event: str, payload: dict, *, using: str | None = None) -> None:
    """Send one `event` to several rooms once the current transaction on `using` commits (now if
    none), through the publisher thread: each room receives what `broadcast(room, ...)` would send it."""
    messages = [(group_name(room), room_message(room, event, payload)) for room in rooms]
    if not messages:
        return
    transaction.on_commit(lambda: publisher().send(messages), using=using)


async def abroadcast(room: str, event: str, payload: dict) -> None:
    """The async form, for code already on the event loop (no transaction to wait for)."""
    await get_channel_layer().group_send(group_name(room), room_message(room, event, payload))
