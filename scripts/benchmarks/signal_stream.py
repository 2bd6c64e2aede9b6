"""Signal's /stream under load (issue 18): `clients` encrypted sockets through loopback, messages
fanned out to rooms of 10 and to one room of every socket; delivered messages per second and the
p99 latency from publication (the kernel's realtime helper in this process) to decryption in the
client, next to the same run without encryption (signal_plain.py), and the server's memory per
connection. Clients are Python (asyncio) in this process, on the same 2 cores as the server."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from benchmarks.framework import PLATFORM_ASGI, BenchmarkError, Context, percentile

CLIENTS = 1000
SMALL_ROOM = 10
IN_FLIGHT = 4  # rounds published and not yet delivered
SIGNAL_ASGI_APP = "merchant_platform.asgi:application"
PLAIN_ASGI_APP = "benchmarks.signal_plain:application"
INFO = "merchant-platform/signal/stream/v1"


def _jwks_server(document: bytes) -> ThreadingHTTPServer:
    """Identity's key set as the replica fetches it (GET /jw-certs), holding the bench's key."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args):
            """No access log on stderr."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _tokens(users: int) -> tuple[bytes, dict[int, str]]:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    from merchant_platform.verification.jwks import public_jwk
    from merchant_platform.verification.tokens import access_token_claims

    key = ec.generate_private_key(ec.SECP256R1())
    jwk = public_jwk(key.public_key())
    tokens = {
        user: jwt.encode(access_token_claims(user_id=user, lifetime_seconds=3600), key, algorithm="ES256", headers={"kid": jwk["kid"]})
        for user in range(9_000_000_001, 9_000_000_001 + users)
    }
    return json.dumps({"keys": [jwk]}).encode(), tokens


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


class Client:
    """One socket of the load: the handshake, then frames opened (or parsed, plain) as they come."""

    def __init__(self, url: str, token: str, *, encrypted: bool):
        self.url, self.token, self.encrypted = url, token, encrypted
        self.latencies: list[float] = []

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        from apps.signal import protocol

        self.ws = await connect(self.url, compression=None, open_timeout=30, max_size=2**22)
        private_key = protocol.generate_private_key()
        hello = {"event": "handshake", "auth": {"type": "Bearer", "token": self.token}}
        await self.ws.send(json.dumps({**hello, "publicKey": protocol.b64encode(protocol.public_key_bytes(private_key))}))
        connected = json.loads(await self.ws.recv())
        if connected.get("event") != "connected":
            raise BenchmarkError(f"handshake refused: {connected}")
        peer = protocol.load_public_key(protocol.b64decode(connected["publicKey"], field="publicKey"))
        key = protocol.derive_key(private_key, peer, salt=protocol.b64decode(connected["salt"], field="salt"), info=INFO)
        self.channel = protocol.SecureChannel(key, sending=protocol.CLIENT_TO_SERVER)
        await self.next_event()  # subscribed to the user's room

    async def next_event(self) -> dict:
        text = await self.ws.recv()
        return self.channel.open(text) if self.encrypted else json.loads(text)

    async def listen(self) -> None:
        while True:
            event = await self.next_event()
            if event["event"] == "message":
                self.latencies.append((time.time() - event["payload"]["sentAt"]) * 1000)


async def _fan_out(url: str, tokens: list[str], *, encrypted: bool, duration: float, rooms: list[str], pid: int) -> dict:
    """Connect one client per token, publish to `rooms` in rounds for `duration` seconds, and wait
    (bounded) for the deliveries; returns the figures (and the server's memory growth per socket)."""
    from merchant_platform import realtime

    clients = [Client(url, token, encrypted=encrypted) for token in tokens]
    before = _rss_kib(pid)
    for start in range(0, len(clients), 50):  # 50 handshakes at a time
        await asyncio.gather(*(client.connect() for client in clients[start : start + 50]))
    kib_per_connection = (_rss_kib(pid) - before) / len(clients)
    listeners = [asyncio.create_task(client.listen()) for client in clients]
    loop = asyncio.get_running_loop()

    def delivered() -> int:
        return sum(len(client.latencies) for client in clients)

    # Closed loop with a window: a round (one message to every room, so one to every socket) is
    # published while fewer than IN_FLIGHT rounds are undelivered: the server runs at its capacity
    # without an unbounded queue.
    published = 0
    started = time.perf_counter()
    while time.perf_counter() - started < duration:
        if delivered() >= (published - IN_FLIGHT) * len(clients):
            await loop.run_in_executor(None, lambda: realtime.broadcast_many(rooms, "bench", {"sentAt": time.time()}))
            published += 1
        else:
            await asyncio.sleep(0.001)
    await loop.run_in_executor(None, realtime.flush, 10.0)
    expected = published * len(clients)  # every socket is in exactly one of the rooms
    deadline = time.perf_counter() + 30
    while delivered() < expected and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    latencies = [latency for client in clients for latency in client.latencies]
    for listener in listeners:
        listener.cancel()
    await asyncio.gather(*(client.ws.close() for client in clients), return_exceptions=True)
    return {
        "published": published,
        "delivered": len(latencies),
        "expected": expected,
        "seconds": elapsed,
        "latencies": latencies,
        "kib_per_connection": kib_per_connection,
    }


def run(ctx: Context) -> list[dict]:
    ctx.django()
    clients = int(os.environ.get("SIGNAL_BENCH_CLIENTS", CLIENTS))  # a smaller run: e.g. 100
    document, tokens = _tokens(clients // SMALL_ROOM + 1)
    jwks = _jwks_server(document)
    users = list(tokens)
    env = {
        "APP_SERVICE": "signal",
        "IDENTITY_JWKS_URL": f"http://127.0.0.1:{jwks.server_address[1]}/jw-certs",
        "APP_ENV_WEBSOCKET_ECDH_INFO": INFO,
    }
    cases = {
        # rooms of 10: user i's room holds 10 of its sockets
        f"rooms of {SMALL_ROOM}": (
            [tokens[user] for user in users[:-1] for _ in range(SMALL_ROOM)],
            [f"user.{user}" for user in users[:-1]],
        ),
        # one room of every socket: one user's room
        f"one room of {clients}": ([tokens[users[-1]]] * clients, [f"user.{users[-1]}"]),
    }
    try:
        for encrypted, app in ((True, SIGNAL_ASGI_APP), (False, PLAIN_ASGI_APP)):
            mode = "encrypted" if encrypted else "plain"
            with ctx.server(PLATFORM_ASGI, app, settings_module="settings", ready_path=None, env=env) as base_url:
                url = base_url.replace("http://", "ws://") + "/stream"
                pid = ctx.server_pid(base_url)
                for case, (case_tokens, rooms) in cases.items():
                    figures = asyncio.run(_fan_out(url, case_tokens, encrypted=encrypted, duration=ctx.duration, rooms=rooms, pid=pid))
                    ctx.rate(
                        f"/stream fan-out, {case}, {mode}",
                        figures["delivered"],
                        figures["seconds"],
                        unit="msg/s",
                        latencies_ms=figures["latencies"] or None,
                        clients=len(case_tokens),
                        lost=figures["expected"] - figures["delivered"],
                    )
                    if figures["latencies"]:
                        ctx.record(
                            f"/stream p99 publish-to-decrypt, {case}, {mode}",
                            value=round(percentile(figures["latencies"], 99), 2),
                            unit="ms",
                        )
                    ctx.record(
                        f"/stream memory per connection, {case}, {mode}",
                        value=round(figures["kib_per_connection"], 1),
                        unit="KiB",
                    )
    finally:
        jwks.shutdown()
    return ctx.results
