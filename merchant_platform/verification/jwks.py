"""Identity's key set (JWKS, `/jw-certs`), the keys access tokens are verified with.

Keys are cached per process (and the last key set fetched is kept in Redis, with an HMAC under
APP_ENV_APPLICATION_SECRET: a copy that fails it is dropped), so tokens keep verifying while identity
or its database is down (spec 7). An unknown `kid` triggers a refetch promptly (fetches are at least
JWKS_REFETCH_MIN_INTERVAL_SECONDS apart per process); a kid the fetched key set did not hold is not
refetched for JWKS_UNKNOWN_KID_TTL_SECONDS (a negative cache per kid), so made-up kids cannot hold
back a real rotation.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.cache import cache
from django_redis import get_redis_connection

from merchant_platform import crypto, http
from merchant_platform.logging import get_logger

log = get_logger(__name__)

ALGORITHM = "ES256"
JWKS_CACHE_KEY = "auth:jwks:last"
# A cached copy of the key set in Redis outlives identity outages of a few days.
JWKS_SHARED_COPY_TTL_SECONDS = 7 * 24 * 3600
# How many kids the negative cache of unknown kids remembers (the oldest are forgotten first).
UNKNOWN_KIDS_CAPACITY = 10_000
# The copy carries an HMAC under a key derived from APP_ENV_APPLICATION_SECRET for this purpose.
JWKS_MAC_PURPOSE = "jwks-shared-copy"


def public_key_from_jwk(jwk: dict) -> ec.EllipticCurvePublicKey | None:
    """The P-256 public key of one JWKS member, or None when the member is not an ES256 signing key."""
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or jwk.get("alg", ALGORITHM) != ALGORITHM:
        return None
    if jwk.get("use", "sig") != "sig" or not jwk.get("kid"):
        return None
    try:
        key = jwt.PyJWK(jwk, algorithm=ALGORITHM).key
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
        return None
    return key if isinstance(key, ec.EllipticCurvePublicKey) else None


def jwk_thumbprint(jwk: dict) -> str:
    """RFC 7638 thumbprint of an EC public JWK: the `kid` identity gives each key."""
    canonical = json.dumps({name: jwk[name] for name in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).decode().rstrip("=")


def public_jwk(public_key: ec.EllipticCurvePublicKey, *, kid: str | None = None) -> dict:
    """The JWKS member of a P-256 public key: kty, crv, x, y, kid, alg and use."""
    jwk = jwt.algorithms.ECAlgorithm.to_jwk(public_key, as_dict=True)
    return {**jwk, "kid": kid or jwk_thumbprint(jwk), "alg": ALGORITHM, "use": "sig"}


class JWKSCache:
    """kid -> public key, per process.

    Sources, in order: keys pinned with `pin()` (tests, tools), the key set last fetched, and on an
    unknown kid a refetch from the local source (identity's own key ring when identity runs in this
    process) or else IDENTITY_JWKS_URL. A failed fetch keeps the keys already known and falls back
    to the copy in Redis, so an identity outage does not stop verification.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._pinned: dict[str, ec.EllipticCurvePublicKey] = {}
        self._fetched: dict[str, ec.EllipticCurvePublicKey] = {}
        self._fetched_at = 0.0
        self._last_attempt = float("-inf")
        self._refreshing = False
        self._local_source: Callable[[], dict] | None = None
        # kid -> monotonic instant until which a kid the key set did not hold is not refetched.
        self._unknown: OrderedDict[str, float] = OrderedDict()

    # Public API ----------------------------------------------------------------------------------

    def set_local_source(self, source: Callable[[], dict] | None) -> None:
        """Read the key set from `source()` instead of HTTP (identity does this in its own process)."""
        self._local_source = source
        self._last_attempt = float("-inf")

    def pin(self, jwks_or_jwk: dict) -> list[str]:
        """Trust these keys for the life of the process (test keys, tools); returns their kids."""
        kids = []
        for jwk in jwks_or_jwk.get("keys", [jwks_or_jwk]):
            key = public_key_from_jwk(jwk)
            if key is not None:
                self._pinned[jwk["kid"]] = key
                kids.append(jwk["kid"])
        return kids

    def unpin(self, kid: str) -> None:
        self._pinned.pop(kid, None)

    def known_key(self, kid: str) -> ec.EllipticCurvePublicKey | None:
        """The key of `kid` if this process knows it, without fetching."""
        return self._pinned.get(kid) or self._fetched.get(kid)

    def key_for(self, kid: str) -> ec.EllipticCurvePublicKey | None:
        key = self._pinned.get(kid) or self._fetched.get(kid)
        if key is not None:
            if time.monotonic() - self._fetched_at > settings.JWKS_MAX_AGE_SECONDS and kid not in self._pinned:
                self._refresh_in_background()
            return key
        now = time.monotonic()
        if self._unknown.get(kid, float("-inf")) > now:
            return None  # the key set did not hold it a moment ago: no refetch for this kid yet
        if self.refresh(reason="unknown kid") and kid not in self._fetched:
            self._remember_unknown(kid, now)
        # A fetch another request started (or just made) may have brought the kid.
        return self._fetched.get(kid)

    def refresh(self, *, reason: str = "requested", force: bool = False) -> bool:
        """Fetch the key set now unless one was fetched within the refetch interval; True if fetched."""
        now = time.monotonic()
        if not force and now - self._last_attempt < settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS:
            with self._lock:  # a fetch in flight (e.g. a replica's first): its keys, not "unknown"
                return False
        with self._lock:
            if not force and time.monotonic() - self._last_attempt < settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS:
                return False
            self._last_attempt = time.monotonic()
            try:
                jwks = self._fetch()
            except Exception as exc:  # any failure keeps the known keys (spec 7)
                log.warning("auth.jwks_fetch_failed", reason=reason, error=f"{type(exc).__name__}: {exc}"[:300])
                if not self._fetched:
                    self._install(self._shared_copy() or {"keys": []}, source="redis")
                return False
            self._install(jwks, source="local" if self._local_source else "http")
            if not self._local_source:
                self._store_shared_copy(jwks)
            return True

    def warm_up(self) -> None:
        """Fetch at process start without delaying it (spec 5: verifiers fetch the key set at boot)."""
        threading.Thread(target=self.refresh, kwargs={"reason": "boot", "force": True}, name="jwks-warm-up", daemon=True).start()

    def reset(self) -> None:
        """Forget the fetched keys and the refetch timer (pinned keys stay); for tests and tools."""
        with self._lock:
            self._fetched = {}
            self._fetched_at = 0.0
            self._last_attempt = float("-inf")
            self._unknown.clear()

    def kids(self) -> list[str]:
        return sorted({*self._pinned, *self._fetched})

    # Internals -----------------------------------------------------------------------------------

    def _fetch(self) -> dict:
        if self._local_source is not None:
            return self._local_source()
        response = http.session(retries=0).get(settings.IDENTITY_JWKS_URL, timeout=settings.JWKS_FETCH_TIMEOUT_SECONDS)
        response.raise_for_status()
        jwks = response.json()
        if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
            raise ValueError("the JWKS document has no `keys` array")
        return jwks

    def _install(self, jwks: dict, *, source: str) -> None:
        keys = {}
        for jwk in jwks.get("keys", []):
            key = public_key_from_jwk(jwk) if isinstance(jwk, dict) else None
            if key is not None:
                keys[jwk["kid"]] = key
        self._fetched = keys
        self._fetched_at = time.monotonic()
        log.info("auth.jwks_loaded", source=source, kids=",".join(sorted(keys)))

    def _remember_unknown(self, kid: str, now: float) -> None:
        with self._lock:
            self._unknown[kid] = now + settings.JWKS_UNKNOWN_KID_TTL_SECONDS
            self._unknown.move_to_end(kid)
            while len(self._unknown) > UNKNOWN_KIDS_CAPACITY:
                self._unknown.popitem(last=False)

    def _refresh_in_background(self) -> None:
        if self._refreshing:
            return
        self._refreshing = True

        def run():
            try:
                self.refresh(reason="max age")
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="jwks-refresh", daemon=True).start()

    @staticmethod
    def _shared_copy() -> dict | None:
        """The key set another process stored in Redis, if its MAC holds and it is not too old.
        Read raw (never unpickled): whoever can write to Redis must not be able to install keys."""
        name = shared_copy_name()
        if name is None:
            return None
        try:
            redis = get_redis_connection("default")
            raw = redis.get(name)
        except Exception as exc:  # Redis down: nothing to fall back to
            log.warning("auth.jwks_shared_copy_unavailable", error=type(exc).__name__)
            return None
        if raw is None:
            return None
        jwks = _authentic_shared_copy(raw)
        if jwks is None:
            log.warning("auth.jwks_shared_copy_rejected")
            try:
                redis.delete(name)
            except Exception as exc:
                log.warning("auth.jwks_shared_copy_unavailable", error=type(exc).__name__)
        return jwks

    @staticmethod
    def _store_shared_copy(jwks: dict) -> None:
        stored = int(time.time())
        document = json.dumps(jwks, separators=(",", ":"), sort_keys=True)
        tag = crypto.mac(_shared_copy_data(document, stored), purpose=JWKS_MAC_PURPOSE)
        if tag is None:  # no application secret: a copy nobody could authenticate is not kept
            return
        try:
            entry = json.dumps({"jwks": document, "stored": stored, "mac": tag})
            get_redis_connection("default").set(shared_copy_name(), entry, ex=JWKS_SHARED_COPY_TTL_SECONDS)
        except Exception as exc:  # the copy is an optimisation; verification goes on without it
            log.warning("auth.jwks_shared_copy_not_stored", error=type(exc).__name__)


def shared_copy_name() -> str | None:
    """The Redis key of the shared copy: one per application secret (named by a MAC of a constant),
    so a process configured with another secret neither overwrites nor erases the copy its peers
    fall back on while identity is down. None without a secret."""
    tag = crypto.mac(JWKS_CACHE_KEY.encode(), purpose=JWKS_MAC_PURPOSE)
    return None if tag is None else cache.make_key(f"{JWKS_CACHE_KEY}:{tag[:16]}")


def _shared_copy_data(document: str, stored: int) -> bytes:
    return f"{stored}\n{document}".encode()


def _authentic_shared_copy(raw: bytes) -> dict | None:
    """The key set of a shared copy when its MAC (APP_ENV_APPLICATION_SECRET) holds and it was stored
    within JWKS_SHARED_COPY_TTL_SECONDS; else None."""
    try:
        entry = json.loads(raw)
        document, stored, tag = entry["jwks"], entry["stored"], entry["mac"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(document, str) or not isinstance(stored, int) or stored + JWKS_SHARED_COPY_TTL_SECONDS < time.time():
        return None
    if not crypto.mac_verifies(_shared_copy_data(document, stored), tag, purpose=JWKS_MAC_PURPOSE):
        return None
    jwks = json.loads(document)
    return jwks if isinstance(jwks, dict) else None


jwks_cache = JWKSCache()
