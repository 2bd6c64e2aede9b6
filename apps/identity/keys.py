"""Identity's signing keys: ES256 (P-256) private keys read from a mounted path, never from env text.

IDENTITY_SIGNING_KEY_PATH is either one PEM file (always active) or a directory of PEM files named
`<activation time>.pem` (`20260101T000000Z.pem`, UTC), which is how keys rotate:

- the signing key is the one with the latest activation time that has passed;
- a key whose activation time is still ahead is published in the JWKS already (verifiers learn it
  before the first token signed with it), but does not sign yet;
- a superseded key stays in the JWKS until its successor has been active for longer than the
  longest token lifetime (plus leeway), so every token it signed expires before it leaves.

`manage.py generate_signing_key` writes a new key file. The ring is re-read when the directory
changes (checked at most every RELOAD_INTERVAL_SECONDS), so rotation needs no restart.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings

from merchant_platform.verification.jwks import public_jwk

ACTIVATION_FORMAT = "%Y%m%dT%H%M%SZ"
RELOAD_INTERVAL_SECONDS = 5.0


class SigningKeyMissing(RuntimeError):
    """No usable signing key at IDENTITY_SIGNING_KEY_PATH."""


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private_key: ec.EllipticCurvePrivateKey
    activates_at: float  # unix time
    path: Path

    @property
    def jwk(self) -> dict:
        return public_jwk(self.private_key.public_key(), kid=self.kid)


def _activation_time(path: Path) -> float | None:
    try:
        return datetime.strptime(path.stem, ACTIVATION_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _load(path: Path, activates_at: float) -> SigningKey:
    try:
        private_key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyMissing(f"{path} is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(private_key, ec.EllipticCurvePrivateKey) or not isinstance(private_key.curve, ec.SECP256R1):
        raise SigningKeyMissing(f"{path} is not an EC P-256 key (ES256 needs one)")
    kid = public_jwk(private_key.public_key())["kid"]
    return SigningKey(kid=kid, private_key=private_key, activates_at=activates_at, path=path)


def _key_files(root: Path) -> list[tuple[Path, float]]:
    if root.is_file():
        return [(root, 0.0)]
    if not root.is_dir():
        return []
    files = []
    for path in sorted(root.glob("*.pem")):
        activates_at = _activation_time(path)
        if activates_at is not None:
            files.append((path, activates_at))
    return files


class KeyRing:
    """The keys under one path, sorted by activation time."""

    def __init__(self, root: Path):
        self.root = root
        self.keys: list[SigningKey] = sorted((_load(path, at) for path, at in _key_files(root)), key=lambda k: k.activates_at)

    def signing_key(self, now: float | None = None) -> SigningKey:
        now = time.time() if now is None else now
        active = [key for key in self.keys if key.activates_at <= now]
        if not active:
            raise SigningKeyMissing(f"no active ES256 signing key under {self.root}")
        return active[-1]

    def published(self, now: float | None = None) -> list[SigningKey]:
        """Every key that can still verify a live token, and the keys about to sign."""
        now = time.time() if now is None else now
        retire_after = max(settings.IDENTITY_ACCESS_TOKEN_TTL_SECONDS, 0) + settings.JWT_LEEWAY_SECONDS
        published = []
        for index, key in enumerate(self.keys):
            successors = [k for k in self.keys[index + 1 :] if k.activates_at <= now]
            superseded_at = successors[0].activates_at if successors else None
            if superseded_at is None or now < superseded_at + retire_after:
                published.append(key)
        return published

    def jwks(self, now: float | None = None) -> dict:
        return {"keys": [key.jwk for key in self.published(now)]}


class _RingCache:
    """One KeyRing per path, re-read when the directory listing changes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ring: KeyRing | None = None
        self._signature: tuple | None = None
        self._checked_at = float("-inf")

    @staticmethod
    def _signature_of(root: Path) -> tuple:
        entries = [root] if root.is_file() else (sorted(root.glob("*.pem")) if root.is_dir() else [])
        return (str(root), *((str(p), p.stat().st_mtime_ns) for p in entries))

    def get(self, *, force: bool = False) -> KeyRing:
        root = Path(settings.IDENTITY_SIGNING_KEY_PATH)
        now = time.monotonic()
        if not force and self._ring is not None and self._ring.root == root and now - self._checked_at < RELOAD_INTERVAL_SECONDS:
            return self._ring
        with self._lock:
            signature = self._signature_of(root)
            if self._ring is None or signature != self._signature:
                self._ring, self._signature = KeyRing(root), signature
            self._checked_at = now
            return self._ring


_rings = _RingCache()


def keyring() -> KeyRing:
    return _rings.get()


def reload() -> KeyRing:
    """Re-read the key path now (the ring otherwise notices changes within RELOAD_INTERVAL_SECONDS)."""
    return _rings.get(force=True)


def public_jwks() -> dict:
    """GET /jw-certs, and the in-process key source of the kernel's verifier."""
    return keyring().jwks()


def configuration_problem() -> str | None:
    """Why identity cannot sign tokens, or None."""
    path = Path(settings.IDENTITY_SIGNING_KEY_PATH)
    try:
        keyring().signing_key()
    except SigningKeyMissing as exc:
        return (
            f"no signing keypair ({exc}); create one with `manage.py generate_signing_key` or mount it at IDENTITY_SIGNING_KEY_PATH={path}"
        )
    return None


def write_new_key(directory: Path, *, activates_at: float | None = None) -> Path:
    """Generate a P-256 key into `directory` as `<activation time>.pem` (mode 0600)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    moment = datetime.fromtimestamp(time.time() if activates_at is None else activates_at, tz=UTC)
    path = directory / f"{moment.strftime(ACTIVATION_FORMAT)}.pem"
    if path.exists():
        raise FileExistsError(f"{path} exists already; wait a second or pick another activation time")
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(pem)
    return path


def ensure_key(directory: Path) -> Path | None:
    """Write a key unless the directory holds one already (concurrent callers write one key)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _key_files(directory):
            return None
        return write_new_key(directory)
