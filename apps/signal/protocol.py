"""The /stream protocol, version 1 (docs/services/signal.md, "The /stream protocol"): the key
agreement and the encrypted frames, shared by the server consumer and the Python client.

After a plaintext handshake (the client's `handshake` with its ephemeral P-256 public key and a
Bearer JWT, the server's `connected` with its own key and a random salt) both peers derive one
AES-256-GCM key: HKDF-SHA256 over the ECDH shared secret, with that salt and
APP_ENV_WEBSOCKET_ECDH_INFO as `info`. Every later frame is `{"seq": n, "data": base64url(AES-GCM)}`;
the nonce is the direction and `seq`, and the associated data names both, so a frame replayed,
reordered, dropped, reflected back to its sender or altered does not open.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

VERSION = 1
CLIENT_TO_SERVER = "c2s"
SERVER_TO_CLIENT = "s2c"
_DIRECTION_BYTE = {CLIENT_TO_SERVER: 1, SERVER_TO_CLIENT: 2}
SALT_BYTES = 32
KEY_BYTES = 32
MAX_SEQUENCE = 2**53 - 1  # JSON numbers stay exact in every client (JavaScript included)

# Close codes (RFC 6455 leaves 4000-4999 to applications). Each close is preceded by a plaintext
# `error` event with the matching `code`, except where the socket cannot carry one.
CLOSE_PROTOCOL_ERROR = 4400  # malformed frame, plaintext after the handshake, binary frame
CLOSE_UNAUTHENTICATED = 4401  # missing, invalid or expired token (also when it expires mid-session)
CLOSE_HANDSHAKE_TIMEOUT = 4408
CLOSE_SEQUENCE_ERROR = 4409  # a frame replayed, reordered or missing
CLOSE_FRAME_TOO_LARGE = 4413
CLOSE_DECRYPT_FAILED = 4422  # a frame that does not open (tampered, or keys that do not match)

_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")


class ProtocolError(Exception):
    """A frame that breaks the protocol: the socket is closed with `close_code` after an `error`."""

    def __init__(self, message: str, *, code: str = "PROTOCOL_ERROR", close_code: int = CLOSE_PROTOCOL_ERROR):
        super().__init__(message)
        self.code = code
        self.close_code = close_code


def b64encode(raw: bytes) -> str:
    """base64url without padding (RFC 4648 section 5), as JWTs and WebCrypto's JWKs write it."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def b64decode(text, *, field: str) -> bytes:
    if not isinstance(text, str) or not _B64URL.match(text):
        raise ProtocolError(f"`{field}` must be base64url text.")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ProtocolError(f"`{field}` must be base64url text.") from None


def generate_private_key() -> ec.EllipticCurvePrivateKey:
    """A fresh ephemeral P-256 key: one per connection, never stored."""
    return ec.generate_private_key(ec.SECP256R1())


def public_key_bytes(private_key: ec.EllipticCurvePrivateKey) -> bytes:
    """The public key as an uncompressed point (65 bytes: 0x04, x, y), WebCrypto's "raw" format."""
    return private_key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)


def load_public_key(raw: bytes) -> ec.EllipticCurvePublicKey:
    """A peer's public key; anything but a valid uncompressed P-256 point is a protocol error."""
    if len(raw) != 65 or raw[0] != 4:
        raise ProtocolError("`publicKey` must be an uncompressed P-256 point (65 bytes).")
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise ProtocolError("`publicKey` is not a point of P-256.") from None


def derive_key(private_key: ec.EllipticCurvePrivateKey, peer_public_key: ec.EllipticCurvePublicKey, *, salt: bytes, info: str) -> bytes:
    """The connection's AES-256 key: HKDF-SHA256(ECDH(private, peer), salt, info)."""
    shared = private_key.exchange(ec.ECDH(), peer_public_key)
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info.encode()).derive(shared)


def nonce(direction: str, sequence: int) -> bytes:
    """96 bits: the direction byte, three zero bytes, the sequence (64-bit big-endian). Unique per
    key, since each direction numbers its frames 1, 2, 3... and never repeats one."""
    return bytes([_DIRECTION_BYTE[direction], 0, 0, 0]) + sequence.to_bytes(8, "big")


def associated_data(direction: str, sequence: int) -> bytes:
    return f"signal/v{VERSION}/{direction}/{sequence}".encode()


class SecureChannel:
    """One connection's encryption state on one side: the key, the next sequence to send and the
    next one expected. Dropped with the connection (the key is never written anywhere)."""

    def __init__(self, key: bytes, *, sending: str):
        self._aead = AESGCM(key)
        self.sending = sending
        self.receiving = SERVER_TO_CLIENT if sending == CLIENT_TO_SERVER else CLIENT_TO_SERVER
        self.sent = 0
        self.received = 0

    def seal(self, message: dict) -> str:
        """The next outgoing frame, as the text to send."""
        self.sent += 1
        plaintext = json.dumps(message, separators=(",", ":")).encode()
        data = self._aead.encrypt(nonce(self.sending, self.sent), plaintext, associated_data(self.sending, self.sent))
        return json.dumps({"seq": self.sent, "data": b64encode(data)}, separators=(",", ":"))

    def open(self, text: str) -> dict:
        """Decrypt the next incoming frame. A frame that is not an encrypted frame (plaintext after
        the handshake), carries another sequence than the next one (a replay, a reordering, a gap) or
        does not authenticate raises ProtocolError with the code to close with."""
        try:
            frame = json.loads(text)
        except ValueError:
            raise ProtocolError("Frames after the handshake must be encrypted.") from None
        if not isinstance(frame, dict) or set(frame) != {"seq", "data"}:
            raise ProtocolError("Frames after the handshake must be encrypted: {seq, data} only.")
        sequence = frame["seq"]
        if type(sequence) is not int or not 0 < sequence <= MAX_SEQUENCE:
            raise ProtocolError("`seq` must be a positive integer.")
        if sequence != self.received + 1:
            raise ProtocolError(
                f"Expected frame {self.received + 1}, got {sequence}: replayed or reordered.",
                code="SEQUENCE_ERROR",
                close_code=CLOSE_SEQUENCE_ERROR,
            )
        data = b64decode(frame["data"], field="data")
        try:
            plaintext = self._aead.decrypt(nonce(self.receiving, sequence), data, associated_data(self.receiving, sequence))
        except InvalidTag:
            raise ProtocolError("The frame does not decrypt.", code="DECRYPT_FAILED", close_code=CLOSE_DECRYPT_FAILED) from None
        self.received = sequence
        try:
            message = json.loads(plaintext)
        except ValueError:
            raise ProtocolError("The decrypted frame is not JSON.") from None
        if not isinstance(message, dict) or not isinstance(message.get("event"), str):
            raise ProtocolError("A decrypted frame is a JSON object with an `event`.")
        return message
