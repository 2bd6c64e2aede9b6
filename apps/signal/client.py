"""A small Python client of /stream (docs/services/signal.md): the handshake, encrypted events,
subscriptions. Used by the tests and the bench; a third party's client speaks the same protocol.

    with StreamClient("ws://127.0.0.1:8002/stream", token, info=ECDH_INFO) as client:
        client.subscribe("merchant.5")
        message = client.receive_message()  # {"event": "message", "room", "name", "payload"}
"""

from __future__ import annotations

import json

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from apps.signal import protocol


class StreamError(Exception):
    """The server sent an `error` event (plaintext and fatal, or encrypted and about one request),
    or closed the socket: `code` is the error code, `close_code` the WebSocket close code if any."""

    def __init__(self, code: str, message: str = "", *, close_code: int | None = None, room: str | None = None):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.close_code = close_code
        self.room = room


class StreamClient:
    def __init__(self, url: str, token: str, *, info: str, origin: str | None = None, timeout: float = 10.0):
        self.url, self.token, self.info, self.origin, self.timeout = url, token, info, origin, timeout
        self.ws: ClientConnection | None = None
        self.channel: protocol.SecureChannel | None = None
        self.connected: dict = {}
        self.pending: list[dict] = []  # events that arrived while a request waited for its reply
        self.offsets: dict[str, int] = {}  # the last message offset seen per room (for recovery)

    def __enter__(self) -> StreamClient:
        return self.connect()

    def __exit__(self, *exc_info) -> None:
        self.close()

    def connect(self) -> StreamClient:
        """Open the socket and run the handshake; raises StreamError when the server refuses."""
        headers = {"Origin": self.origin} if self.origin else None
        # legacy=True: websockets' name for a connection kept open outside a `with` block.
        self.ws = connect(self.url, additional_headers=headers, open_timeout=self.timeout, max_size=2**22, legacy=True)
        private_key = protocol.generate_private_key()
        self.send_raw(
            json.dumps(
                {
                    "event": "handshake",
                    "version": protocol.VERSION,
                    "auth": {"type": "Bearer", "token": self.token},
                    "publicKey": protocol.b64encode(protocol.public_key_bytes(private_key)),
                }
            )
        )
        reply = json.loads(self.receive_raw())
        if reply.get("event") == "error":
            raise StreamError(reply.get("code", ""), reply.get("message", ""), close_code=self._close_code())
        if reply.get("event") != "connected":
            raise StreamError("PROTOCOL_ERROR", f"expected `connected`, got {reply.get('event')!r}")
        server_key = protocol.load_public_key(protocol.b64decode(reply["publicKey"], field="publicKey"))
        salt = protocol.b64decode(reply["salt"], field="salt")
        self.channel = protocol.SecureChannel(
            protocol.derive_key(private_key, server_key, salt=salt, info=self.info), sending=protocol.CLIENT_TO_SERVER
        )
        self.connected = reply
        return self

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        self.channel = None

    # --- raw frames (tests use them to misbehave on purpose) ---------------------------------------

    def send_raw(self, text: str) -> None:
        self.ws.send(text)

    def receive_raw(self, timeout: float | None = None) -> str:
        try:
            return self.ws.recv(timeout=self.timeout if timeout is None else timeout)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            raise StreamError("CLOSED", str(exc), close_code=code) from None

    def _close_code(self) -> int | None:
        try:
            self.ws.recv(timeout=self.timeout)
        except ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd else None
        except TimeoutError:
            return None
        return None

    # --- encrypted events -------------------------------------------------------------------------

    def send(self, message: dict) -> None:
        self.send_raw(self.channel.seal(message))

    def receive(self, timeout: float | None = None) -> dict:
        """The next event, decrypted. A plaintext `error` (fatal) raises StreamError with the close
        code; an encrypted `error` is returned like any event."""
        text = self.receive_raw(timeout)
        frame = json.loads(text)
        if isinstance(frame, dict) and frame.get("event") == "error":
            raise StreamError(frame.get("code", ""), frame.get("message", ""), close_code=self._close_code())
        return self.channel.open(text)

    def request(self, message: dict, *, reply: str) -> dict:
        """Send a room event and return the server's `reply` for that room; an encrypted `error`
        about the room raises StreamError. Other events that arrive meanwhile wait in `pending`."""
        self.send(message)
        while True:
            answer = self.receive()
            if answer.get("room") == message["room"] and answer["event"] in (reply, "error"):
                if answer["event"] == "error":
                    raise StreamError(answer["code"], answer.get("message", ""), room=answer["room"])
                return answer
            self.pending.append(answer)

    def subscribe(self, room: str, since: int | None = None) -> dict:
        """Join a room; with `since` (the last offset seen, e.g. `offsets[room]` of the previous
        connection) the server replays what came after it, or answers `recovered: false` when the
        gap is too old (then reload what you show, e.g. over REST)."""
        message = {"event": "subscribe", "room": room}
        if since is not None:
            message["since"] = since
        return self.request(message, reply="subscribed")

    def unsubscribe(self, room: str) -> dict:
        return self.request({"event": "unsubscribe", "room": room}, reply="unsubscribed")

    def receive_message(self, timeout: float | None = None) -> dict:
        """The next room message (`event: message`), skipping other events and any message whose
        offset was seen already (around a recovery a message may come both replayed and live)."""
        while True:
            message = self.pending.pop(0) if self.pending else self.receive(timeout)
            if message["event"] != "message":
                continue
            offset = message.get("offset")
            if offset is not None:
                if offset <= self.offsets.get(message["room"], 0):
                    continue
                self.offsets[message["room"]] = offset
            return message
