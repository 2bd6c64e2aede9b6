"""/stream against real signal replicas (uvicorn processes), the real Redis and PostgreSQL, with the
project's Python client: handshake and JWT, the encryption rules of spec 5 (wrong ECDH info,
tampered, replayed and reordered frames, plaintext after the handshake), the Origin check, and
messages published from other processes."""

from __future__ import annotations

import json
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from apps.signal import protocol
from apps.signal.client import StreamError
from merchant_platform.realtime import broadcast, flush
from tests.signal.conftest import stream_client
from tests.support.auth import make_caller, mint_token, new_signing_key, random_user_id
from tests.support.broker import unique

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def expect_close(client, code: str, close_code: int, *, timeout: float = 10.0) -> None:
    with pytest.raises(StreamError) as failure:
        client.receive(timeout)
    assert (failure.value.code, failure.value.close_code) == (code, close_code)


def test_handshake_agrees_a_key_and_the_user_room_is_joined(stream_url):
    user_id = random_user_id()
    with stream_client(stream_url, mint_token(user_id)) as client:
        connected = client.connected
        assert connected["event"] == "connected" and connected["requireEncryption"] is True and connected["version"] == 1
        assert len(protocol.b64decode(connected["publicKey"], field="publicKey")) == 65
        assert len(protocol.b64decode(connected["salt"], field="salt")) == 32
        assert client.receive() == {"event": "subscribed", "room": f"user.{user_id}", "offset": 0}
        client.send({"event": "ping"})
        assert client.receive() == {"event": "pong"}

        broadcast(f"user.{user_id}", "notification", {"title": "Hello"})
        flush(5)
        assert client.receive_message() == {
            "event": "message",
            "room": f"user.{user_id}",
            "name": "notification",
            "payload": {"title": "Hello"},
            "offset": 1,
        }


def test_every_frame_after_the_handshake_is_encrypted_with_fresh_nonces(stream_url):
    user_id = random_user_id()
    with stream_client(stream_url, mint_token(user_id)) as client:
        client.receive()
        raw = []
        for n in range(3):
            broadcast(f"user.{user_id}", "tick", {"n": n})
        flush(5)
        for _ in range(3):
            raw.append(json.loads(client.receive_raw()))
        assert [frame["seq"] for frame in raw] == [2, 3, 4]
        assert all(set(frame) == {"seq", "data"} and "tick" not in frame["data"] for frame in raw)
        assert len({frame["data"] for frame in raw}) == 3


def test_a_client_with_another_ecdh_info_cannot_read_or_write(stream_url):
    client = stream_client(stream_url, mint_token(random_user_id()))
    client.info = "another-info"
    with client:
        with pytest.raises(protocol.ProtocolError) as failure:
            client.receive()  # the server's first encrypted event
        assert failure.value.code == "DECRYPT_FAILED"
        client.channel.received = 1  # pretend it opened, and speak
        client.send({"event": "ping"})
        expect_close(client, "DECRYPT_FAILED", protocol.CLOSE_DECRYPT_FAILED)


def test_a_tampered_frame_closes_the_socket(stream_url):
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        client.receive()
        frame = json.loads(client.channel.seal({"event": "ping"}))
        data = bytearray(protocol.b64decode(frame["data"], field="data"))
        data[0] ^= 1
        client.send_raw(json.dumps({"seq": frame["seq"], "data": protocol.b64encode(bytes(data))}))
        expect_close(client, "DECRYPT_FAILED", protocol.CLOSE_DECRYPT_FAILED)


def test_a_replayed_frame_closes_the_socket(stream_url):
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        client.receive()
        frame = client.channel.seal({"event": "ping"})
        client.send_raw(frame)
        assert client.receive() == {"event": "pong"}
        client.send_raw(frame)
        expect_close(client, "SEQUENCE_ERROR", protocol.CLOSE_SEQUENCE_ERROR)


def test_reordered_frames_close_the_socket(stream_url):
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        client.receive()
        client.channel.seal({"event": "ping"})  # frame 1, held back
        client.send_raw(client.channel.seal({"event": "ping"}))  # frame 2 first
        expect_close(client, "SEQUENCE_ERROR", protocol.CLOSE_SEQUENCE_ERROR)


def test_a_frame_sealed_for_the_other_direction_does_not_open(stream_url):
    """A server frame reflected back to the server: the direction in the nonce and the associated
    data differ, so it does not decrypt."""
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        reflected = client.receive_raw()  # the server's frame 1 (subscribed)
        client.send_raw(reflected)
        expect_close(client, "DECRYPT_FAILED", protocol.CLOSE_DECRYPT_FAILED)


@pytest.mark.parametrize(
    "frame",
    [
        json.dumps({"event": "subscribe", "room": "merchant.1"}),
        json.dumps({"event": "handshake", "auth": {"type": "Bearer", "token": "x"}, "publicKey": "AA"}),
        "not json",
        json.dumps({"seq": 1, "data": "AAAA", "extra": 1}),
    ],
)
def test_plaintext_after_the_handshake_closes_the_socket(stream_url, frame):
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        client.receive()
        client.send_raw(frame)
        expect_close(client, "PROTOCOL_ERROR", protocol.CLOSE_PROTOCOL_ERROR)


def test_a_binary_frame_closes_the_socket(stream_url):
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        client.receive()
        client.ws.send(b"\x00\x01")
        expect_close(client, "PROTOCOL_ERROR", protocol.CLOSE_PROTOCOL_ERROR)


@pytest.mark.parametrize(
    ("token", "code"),
    [
        (lambda: mint_token(random_user_id(), exp=int(time.time()) - 120, iat=int(time.time()) - 1000, nbf=0), "TOKEN_EXPIRED"),
        (lambda: mint_token(random_user_id(), key=new_signing_key()), "TOKEN_KEY_UNKNOWN"),
        (lambda: mint_token(random_user_id(), aud="elsewhere"), "TOKEN_AUDIENCE_INVALID"),
        (lambda: "not-a-token", "TOKEN_INVALID"),
    ],
)
def test_a_refused_token_gets_an_error_and_the_unauthenticated_close_code(stream_url, token, code):
    with pytest.raises(StreamError) as failure:
        stream_client(stream_url, token()).connect()
    assert (failure.value.code, failure.value.close_code) == (code, protocol.CLOSE_UNAUTHENTICATED)


@pytest.mark.parametrize(
    "hello",
    [
        {"event": "handshake", "auth": {"type": "Basic", "token": "x"}},
        {"event": "handshake", "auth": "Bearer x"},
        {"event": "handshake"},
    ],
)
def test_a_handshake_without_a_bearer_token_is_refused(stream_url, hello):
    with connect(stream_url) as ws:
        ws.send(json.dumps({**hello, "publicKey": protocol.b64encode(protocol.public_key_bytes(protocol.generate_private_key()))}))
        frame = json.loads(ws.recv(timeout=10))
        assert (frame["event"], frame["code"]) == ("error", "UNAUTHENTICATED")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd.code == protocol.CLOSE_UNAUTHENTICATED


@pytest.mark.parametrize("public_key", ["AA", "!!", protocol.b64encode(b"\x04" + b"\x01" * 64), None])
def test_a_bad_public_key_is_a_protocol_error(stream_url, public_key):
    with connect(stream_url) as ws:
        ws.send(
            json.dumps({"event": "handshake", "auth": {"type": "Bearer", "token": mint_token(random_user_id())}, "publicKey": public_key})
        )
        frame = json.loads(ws.recv(timeout=10))
        assert (frame["event"], frame["code"]) == ("error", "PROTOCOL_ERROR")


def test_the_socket_closes_when_the_token_expires(stream_url):
    with stream_client(stream_url, mint_token(random_user_id(), lifetime_seconds=2)) as client:
        client.receive()
        expect_close(client, "TOKEN_EXPIRED", protocol.CLOSE_UNAUTHENTICATED, timeout=15)


def test_origins_are_checked_against_the_configured_list(stream_url):
    token = mint_token(random_user_id())
    with pytest.raises(InvalidStatus) as refused:
        stream_client(stream_url, token, origin="https://evil.example").connect()
    assert refused.value.response.status_code == 403
    with stream_client(stream_url, token, origin="http://127.0.0.1:8000") as client:
        assert client.connected["event"] == "connected"


def test_no_handshake_in_time_closes_the_socket(stream_servers):
    (url,) = stream_servers(1, SIGNAL_HANDSHAKE_TIMEOUT_SECONDS="1")
    with connect(url) as ws:
        frame = json.loads(ws.recv(timeout=10))
        assert (frame["event"], frame["code"]) == ("error", "HANDSHAKE_TIMEOUT")


def test_two_replicas_deliver_a_message_published_once(stream_servers):
    first, second = stream_servers(2)
    room_owner = make_caller(merchants=[4242])
    room = unique("merchant.4242.orders")
    with stream_client(first, room_owner.token) as a, stream_client(second, room_owner.token) as b:
        a.subscribe(room)
        b.subscribe(room)
        broadcast(room, "order.paid", {"orderId": "7"})
        flush(5)
        for client in (a, b):
            assert client.receive_message() == {
                "event": "message",
                "room": room,
                "name": "order.paid",
                "payload": {"orderId": "7"},
                "offset": 1,
            }
        with pytest.raises(TimeoutError):
            a.receive_message(timeout=1)  # once each, not once per replica


def test_a_frame_over_the_limit_closes_the_socket(stream_url):
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        client.receive()
        client.send({"event": "ping", "padding": "é" * 40_000})  # 40,000 characters, 80,000 bytes
        expect_close(client, "FRAME_TOO_LARGE", protocol.CLOSE_FRAME_TOO_LARGE)


def test_an_unknown_event_is_an_encrypted_error_and_the_socket_stays(stream_url):
    with stream_client(stream_url, mint_token(random_user_id())) as client:
        client.receive()
        client.send({"event": "shout"})
        error = client.receive()
        assert (error["event"], error["code"]) == ("error", "EVENT_UNKNOWN")
        client.send({"event": "ping"})
        assert client.receive() == {"event": "pong"}


def test_rooms_per_socket_are_bounded(stream_servers):
    (url,) = stream_servers(1, SIGNAL_MAX_ROOMS_PER_CONNECTION="2")
    caller = make_caller(merchants=[321])
    with stream_client(url, caller.token) as client:
        client.subscribe("merchant.321")  # with user.<id>: two rooms
        with pytest.raises(StreamError) as refused:
            client.subscribe("merchant.321.orders")
        assert refused.value.code == "TOO_MANY_ROOMS"
        client.unsubscribe("merchant.321")
        assert client.subscribe("merchant.321.orders")["room"] == "merchant.321.orders"
