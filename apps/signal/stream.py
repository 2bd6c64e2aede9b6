"""The WebSocket /stream (spec 5): a Channels consumer per socket, served by the ASGI server.

The handshake authenticates a Bearer JWT and agrees a per-connection AES-256-GCM key (protocol.py);
after it every frame in both directions is encrypted and numbered. The socket joins its user's room
at once; other rooms are joined by an encrypted `subscribe` the room rules allow (rooms.py), and left
again (`error ROOM_REVOKED`) when a periodic re-check finds they no longer allow it. Room
messages come from any process of any service through the shared Redis (merchant_platform.realtime:
the Channels group of the room), and this replica encrypts them for each of its own sockets:
publishers never see a key.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
import uuid
from datetime import UTC, datetime

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from apps.signal import protocol, rooms
from apps.signal.history import history
from apps.signal.presence import presence
from apps.signal.protocol import ProtocolError
from apps.signal.serializers import ROOM_PATTERN
from apps.signal.services import user_room
from merchant_platform import revocation
from merchant_platform.logging import get_logger
from merchant_platform.realtime import group_name
from merchant_platform.verification.tokens import TokenRejected, TokenUser, verify_access_token

log = get_logger(__name__)


ROOM = re.compile(ROOM_PATTERN)


class StreamConsumer(AsyncWebsocketConsumer):
    """One /stream socket: plaintext handshake, then encrypted events only."""

    async def connect(self):
        self.session_id = uuid.uuid4().hex
        self.user: TokenUser | None = None
        self.channel: protocol.SecureChannel | None = None
        self.rooms: set[str] = set()
        self.closing = False
        self.timers: list[asyncio.TimerHandle] = []
        self.tasks: set[asyncio.Task] = set()
        self.recheck: asyncio.Task | None = None
        origin = dict(self.scope.get("headers", [])).get(b"origin")
        if origin is not None and origin.decode("latin-1") not in settings.SIGNAL_ALLOWED_ORIGINS:
            # Refused before the upgrade (HTTP 403): a page of another site may not use the
            # visitor's token through this socket (cross-site WebSocket hijacking).
            log.info("stream.origin_refused", origin=origin.decode("latin-1")[:200])
            await self.close()
            return
        await self.accept()
        loop = asyncio.get_running_loop()
        self.timers.append(loop.call_later(settings.SIGNAL_HANDSHAKE_TIMEOUT_SECONDS, self._expire_handshake))

    def _expire_handshake(self):
        if self.channel is None and not self.closing:
            self._fail_soon("HANDSHAKE_TIMEOUT", "No handshake in time.", protocol.CLOSE_HANDSHAKE_TIMEOUT)

    def _expire_token(self):
        if not self.closing:
            self._fail_soon("TOKEN_EXPIRED", "The access token has expired.", protocol.CLOSE_UNAUTHENTICATED)

    def _fail_soon(self, code: str, message: str, close_code: int) -> None:
        """From a timer: close through a task (kept referenced until it ends)."""
        task = asyncio.get_running_loop().create_task(self.fail(code, message, close_code))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def disconnect(self, code):
        self.closing = True
        for timer in self.timers:
            timer.cancel()
        if self.recheck is not None:
            self.recheck.cancel()
        for room in self.rooms:
            await self.channel_layer.group_discard(group_name(room), self.channel_name)
        self.rooms.clear()
        self.channel = None  # the key goes with the connection
        if self.user is not None:
            await presence().drop(self.session_id)
            log.info("stream.disconnected", sessionId=self.session_id, userId=str(self.user.id), code=code)

    async def fail(self, code: str, message: str, close_code: int) -> None:
        """A fatal error: a plaintext `error` event, then the close code (docs/services/signal.md)."""
        if self.closing:
            return
        self.closing = True
        log.info("stream.closed", sessionId=self.session_id, code=code, closeCode=close_code)
        await self.send(text_data=json.dumps({"event": "error", "code": code, "message": message}))
        await self.close(code=close_code)

    async def receive(self, text_data=None, bytes_data=None):
        if self.closing:
            return
        try:
            if text_data is None:
                raise ProtocolError("Binary frames are not part of the protocol.")
            if len(text_data) > settings.SIGNAL_MAX_FRAME_BYTES or len(text_data.encode()) > settings.SIGNAL_MAX_FRAME_BYTES:
                raise ProtocolError("The frame is too large.", code="FRAME_TOO_LARGE", close_code=protocol.CLOSE_FRAME_TOO_LARGE)
            if self.channel is None:
                await self.handshake(text_data)
            else:
                await self.handle(self.channel.open(text_data))
        except ProtocolError as exc:
            await self.fail(exc.code, str(exc), exc.close_code)

    # --- handshake --------------------------------------------------------------------------

    async def handshake(self, text: str) -> None:
        try:
            hello = json.loads(text)
        except ValueError:
            raise ProtocolError("The first frame must be the JSON `handshake` event.") from None
        if not isinstance(hello, dict) or hello.get("event") != "handshake":
            raise ProtocolError("The first frame must be the `handshake` event.")
        if hello.get("version", protocol.VERSION) != protocol.VERSION:
            raise ProtocolError(f"Only protocol version {protocol.VERSION} is spoken here.", code="VERSION_UNSUPPORTED")
        auth = hello.get("auth")
        if not isinstance(auth, dict) or auth.get("type") != "Bearer" or not isinstance(auth.get("token"), str) or not auth["token"]:
            raise ProtocolError("`auth` must be {type: Bearer, token}.", code="UNAUTHENTICATED", close_code=protocol.CLOSE_UNAUTHENTICATED)
        peer_key = protocol.load_public_key(protocol.b64decode(hello.get("publicKey"), field="publicKey"))
        try:
            # Off the event loop: an unknown kid fetches identity's key set.
            user = await sync_to_async(verify_access_token, thread_sensitive=False)(auth["token"])
        except TokenRejected as exc:
            raise ProtocolError(str(exc.detail), code=exc.code, close_code=protocol.CLOSE_UNAUTHENTICATED) from None
        private_key = protocol.generate_private_key()
        salt = secrets.token_bytes(protocol.SALT_BYTES)
        key = protocol.derive_key(private_key, peer_key, salt=salt, info=settings.APP_ENV_WEBSOCKET_ECDH_INFO)
        self.user = user
        self.channel = protocol.SecureChannel(key, sending=protocol.SERVER_TO_CLIENT)
        expires_at = int(user.claims["exp"])
        self.timers.append(asyncio.get_running_loop().call_later(max(0.0, expires_at - time.time()), self._expire_token))
        await self.send(
            text_data=json.dumps(
                {
                    "event": "connected",
                    "version": protocol.VERSION,
                    "sessionId": self.session_id,
                    "publicKey": protocol.b64encode(protocol.public_key_bytes(private_key)),
                    "salt": protocol.b64encode(salt),
                    "requireEncryption": True,
                    "expiresAt": expires_at,
                }
            )
        )
        log.info("stream.connected", sessionId=self.session_id, userId=str(user.id))
        self.connected_at = datetime.now(UTC).isoformat()
        await self.join(user_room(user.id))
        self.recheck = asyncio.get_running_loop().create_task(self.recheck_rooms())

    async def recheck_rooms(self) -> None:
        """Every SIGNAL_ROOM_RECHECK_SECONDS: close the socket when identity revoked the session (a
        password change or deactivation moved the user's "valid after" past the token's `iat`), and
        leave the rooms the user may no longer join (a grant, role or membership revoked since). Both
        are cached in Redis and retired by every write, so a round costs a Redis read or two. If the
        policy store cannot answer, the rooms are kept until the next round (logged)."""
        own_room = user_room(self.user.id)
        while not self.closing:
            await asyncio.sleep(settings.SIGNAL_ROOM_RECHECK_SECONDS)
            if await sync_to_async(revocation.issued_before_cutoff, thread_sensitive=False)(self.user.id, self.user.claims["iat"]):
                await self.fail("TOKEN_REVOKED", "The session was revoked.", protocol.CLOSE_UNAUTHENTICATED)
                return
            principal = TokenUser(id=self.user.id, claims=self.user.claims)  # fresh: no memoised grants
            for room in sorted(self.rooms - {own_room}):
                try:
                    allowed = await sync_to_async(rooms.may_join, thread_sensitive=False)(principal, room)
                except Exception as exc:
                    log.warning("stream.room_recheck_failed", sessionId=self.session_id, room=room, error=type(exc).__name__)
                    break
                if not allowed and room in self.rooms:
                    log.info("stream.room_revoked", sessionId=self.session_id, userId=str(self.user.id), room=room)
                    await self.leave(room)
                    message = "Your access to this room was withdrawn."
                    await self.send_secure({"event": "error", "code": "ROOM_REVOKED", "message": message, "room": room})

    # --- encrypted events -------------------------------------------------------------------

    async def send_secure(self, message: dict) -> None:
        if self.channel is not None and not self.closing:
            await self.send(text_data=self.channel.seal(message))

    async def join(self, room: str, since: int | None = None) -> None:
        """Join the room (if not yet), answer `subscribed` with the room's latest offset, then replay
        what the client missed after `since`, or say `recovered: false` when that is no longer kept."""
        if room not in self.rooms:
            await self.channel_layer.group_add(group_name(room), self.channel_name)
            self.rooms.add(room)
            await self.record_presence()
        reply = {"event": "subscribed", "room": room}
        missed: list = []
        if settings.SIGNAL_HISTORY_SIZE > 0:
            try:
                reply["offset"], kept = await history().since(room, since or 0)
            except Exception as exc:
                log.warning("stream.history_failed", room=room, error=f"{type(exc).__name__}: {exc}"[:300])
                kept = None
            if since is not None:
                reply["recovered"] = kept is not None
                missed = kept or []
        await self.send_secure(reply)
        for offset, entry in missed:
            await self.send_secure({"event": "message", "room": room, "name": entry["name"], "payload": entry["payload"], "offset": offset})

    async def record_presence(self) -> None:
        await presence().put(
            {"sessionId": self.session_id, "subjectId": str(self.user.id), "rooms": sorted(self.rooms), "connectedAt": self.connected_at}
        )

    async def handle(self, message: dict) -> None:
        event = message["event"]
        if event == "ping":
            await self.send_secure({"event": "pong"})
        elif event in ("subscribe", "unsubscribe"):
            room, since = message.get("room"), message.get("since")
            if not isinstance(room, str) or not ROOM.match(room):
                await self.send_secure({"event": "error", "code": "ROOM_INVALID", "message": "`room` must be a room name.", "room": None})
                return
            if since is not None and (type(since) is not int or not 0 <= since <= protocol.MAX_SEQUENCE):
                await self.send_secure({"event": "error", "code": "SINCE_INVALID", "message": "`since` must be an offset.", "room": room})
                return
            await (self.subscribe(room, since) if event == "subscribe" else self.unsubscribe(room))
        else:
            await self.send_secure({"event": "error", "code": "EVENT_UNKNOWN", "message": f"Unknown event {event[:50]!r}."})

    async def subscribe(self, room: str, since: int | None) -> None:
        if room in self.rooms:
            await self.join(room, since)
            return
        if len(self.rooms) >= settings.SIGNAL_MAX_ROOMS_PER_CONNECTION:
            await self.send_secure({"event": "error", "code": "TOO_MANY_ROOMS", "message": "Unsubscribe from a room first.", "room": room})
            return
        # A fresh principal: the policy layer memoises grants per principal, and a revoked grant
        # must apply to the next subscription of a long-lived socket.
        principal = TokenUser(id=self.user.id, claims=self.user.claims)
        if not await sync_to_async(rooms.may_join, thread_sensitive=False)(principal, room):
            log.info("stream.room_refused", sessionId=self.session_id, userId=str(self.user.id), room=room)
            await self.send_secure({"event": "error", "code": "ROOM_FORBIDDEN", "message": "You may not join this room.", "room": room})
            return
        await self.join(room, since)

    async def leave(self, room: str) -> None:
        if room in self.rooms:
            await self.channel_layer.group_discard(group_name(room), self.channel_name)
            self.rooms.discard(room)
            await self.record_presence()

    async def unsubscribe(self, room: str) -> None:
        await self.leave(room)
        await self.send_secure({"event": "unsubscribed", "room": room})

    async def room_event(self, message: dict) -> None:
        """A room message from the shared Redis (merchant_platform.realtime.room_message), numbered
        in the room's history."""
        if message["room"] in self.rooms:
            offset = await history().record(message)
            await self.send_secure(
                {"event": "message", "room": message["room"], "name": message["event"], "payload": message["payload"], "offset": offset}
            )
