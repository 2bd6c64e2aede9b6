"""Defence in depth against password guessing (independent of the gateway's rate limit).

Failed sign-ins are counted per identifier and per client IP in Redis over a sliding window of
IDENTITY_SIGNIN_FAILURE_WINDOW_SECONDS; past the limit the identifier (or IP) is locked until the
window ends: 429 SIGN_IN_LOCKED with Retry-After, even with the right password. A success clears
the identifier's count.

When Redis is down sign-in keeps working and the counters fall back to this process's memory: the
protection then holds per process (a few processes multiply the limit by their number), never
disappears, and never locks everyone out.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import threading
import time
from collections import OrderedDict

import redis
from django.conf import settings
from django_redis import get_redis_connection

from merchant_platform.errors import ApiError
from merchant_platform.logging import get_logger

log = get_logger(__name__)
KEY_PREFIX = "mp:identity:signin"
_LOCAL_CAPACITY = 50_000


class SignInLocked(ApiError):
    status_code = 429
    default_code = "SIGN_IN_LOCKED"
    default_detail = "Too many failed sign-in attempts; try again later."

    def __init__(self, wait_seconds: int):
        super().__init__(extra={"retryAfter": wait_seconds})
        self.wait = wait_seconds


def client_ip(request) -> str:
    """The client's address: REMOTE_ADDR, or the last untrusted hop of X-Forwarded-For when the
    peer is a trusted proxy (FORWARDED_ALLOW_IPS)."""
    remote = request.META.get("REMOTE_ADDR", "")
    trusted = settings.TRUSTED_PROXY_IPS
    if not (remote in trusted or "*" in trusted):
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            break
        if hop not in trusted:
            return hop
    return remote


def identifier_digest(kind: str, value: str) -> str:
    """A keyed digest, so Redis never holds identifiers in clear."""
    return hmac.new(settings.SECRET_KEY.encode(), f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()[:32]


class _LocalCounters:
    """The per-process fallback: key -> (count, window end), bounded."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def get(self, key: str) -> tuple[int, int]:
        with self._lock:
            count, ends = self._counts.get(key, (0, 0.0))
            remaining = ends - time.monotonic()
            return (count, int(remaining) + 1) if remaining > 0 else (0, 0)

    def incr(self, key: str, window: int) -> None:
        with self._lock:
            count, ends = self._counts.get(key, (0, 0.0))
            now = time.monotonic()
            self._counts[key] = (count + 1, ends) if ends > now else (1, now + window)
            self._counts.move_to_end(key)
            while len(self._counts) > _LOCAL_CAPACITY:
                self._counts.popitem(last=False)

    def clear(self, key: str) -> None:
        with self._lock:
            self._counts.pop(key, None)


_local = _LocalCounters()


def _keys(identifier_key: str, ip: str) -> tuple[str, str]:
    return f"{KEY_PREFIX}:id:{identifier_key}", f"{KEY_PREFIX}:ip:{ip}"


def _redis():
    return get_redis_connection("default")


def check(identifier_key: str, ip: str) -> None:
    """Raise SignInLocked when the identifier or the IP has failed too often in the window."""
    id_key, ip_key = _keys(identifier_key, ip)
    limits = ((id_key, settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER), (ip_key, settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IP))
    try:
        pipe = _redis().pipeline(transaction=False)
        for key, _ in limits:
            pipe.get(key)
            pipe.ttl(key)
        raw = pipe.execute()
        observed = [(int(raw[i] or 0), max(int(raw[i + 1]), 1)) for i in (0, 2)]
    except redis.RedisError as exc:
        log.warning("identity.signin_guard_degraded", error=type(exc).__name__)
        observed = [_local.get(key) for key, _ in limits]
    for (count, ttl), (_, limit) in zip(observed, limits, strict=True):
        if count >= limit:
            raise SignInLocked(ttl)


def record_failure(identifier_key: str, ip: str) -> None:
    window = settings.IDENTITY_SIGNIN_FAILURE_WINDOW_SECONDS
    keys = _keys(identifier_key, ip)
    try:
        pipe = _redis().pipeline(transaction=False)
        for key in keys:
            pipe.incr(key)
            pipe.expire(key, window, nx=True)
        pipe.execute()
    except redis.RedisError:
        for key in keys:
            _local.incr(key, window)


def record_success(identifier_key: str, ip: str) -> None:
    id_key, _ = _keys(identifier_key, ip)
    _local.clear(id_key)
    # Without Redis the counter simply expires on its own.
    with contextlib.suppress(redis.RedisError):
        _redis().delete(id_key)
