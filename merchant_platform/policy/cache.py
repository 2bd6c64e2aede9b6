"""The grants cache: a user's grants in Redis, under versioned keys, each entry with an HMAC.

Every policy write bumps the user's version (or the version of every role baseline) after commit, so
the next request sees the change. When Redis is down the cache is skipped and the grants are read
from PostgreSQL. A cached entry is JSON with an HMAC (a key derived from APP_ENV_APPLICATION_SECRET)
over the user, the versions, its expiry and the grants: an entry written by anyone else is dropped,
not served.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable

from django.conf import settings
from django.core.cache import cache, caches
from django.db import transaction
from django_redis import get_redis_connection

from merchant_platform import crypto
from merchant_platform.logging import get_logger
from merchant_platform.policy.loading import POLICY_DB, load_grants
from merchant_platform.policy.matching import Grants
from merchant_platform.registry import redis_optional

log = get_logger(__name__)

_CACHE_PREFIX = "authz"
_ROLES_VERSION_KEY = f"{_CACHE_PREFIX}:version:roles"
# After a Redis failure the cache is skipped for this long, so an outage costs one timeout, not one per request.
_CACHE_RETRY_AFTER_SECONDS = 5.0
_cache_state = {"down_until": 0.0}
# Cached grants carry an HMAC under a key derived from APP_ENV_APPLICATION_SECRET for this purpose.
# (v3: grants name the tenants the user created; entries of an older shape are dropped).
_GRANTS_MAC_PURPOSE = "authz-grants-v3"


def _user_version_key(user_id: int | str) -> str:
    return f"{_CACHE_PREFIX}:version:user:{user_id}"


def _cache_usable() -> bool:
    return time.monotonic() >= _cache_state["down_until"]


def _cache_failed(exc: Exception) -> None:
    _cache_state["down_until"] = time.monotonic() + _CACHE_RETRY_AFTER_SECONDS
    log.warning("authz.cache_unavailable", error=type(exc).__name__)


def _grants_key(user_id: int) -> str:
    return f"{_CACHE_PREFIX}:grants:{user_id}"


def _redis():
    """The cache's Redis client, used raw: what this module reads back is JSON it authenticates
    itself, never a pickle (django-redis unpickles whatever a key holds)."""
    return get_redis_connection("default")


def _entry_data(user_id: int, versions: tuple[str, str], until: int, grants: str) -> bytes:
    """What a cached entry's MAC covers: the user (an entry cannot move to another user's key), the
    versions, the end of its lifetime (an old entry cannot be replayed forever) and the grants."""
    return f"{user_id}\n{versions[0]}\n{versions[1]}\n{until}\n{grants}".encode()


def _authentic_grants(user_id: int, raw: bytes | None, current: tuple[str, str]) -> str | None:
    """The grants of a cached entry if it is well formed, stored under the current versions, not
    past its lifetime and carries a valid MAC; else None."""
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
        versions, until, grants, tag = (entry["user"], entry["roles"]), entry["until"], entry["grants"], entry["mac"]
    except (ValueError, TypeError, KeyError):
        return None
    if versions != current or not isinstance(until, int) or not isinstance(grants, str) or until < time.time():
        return None
    return grants if crypto.mac_verifies(_entry_data(user_id, versions, until, grants), tag, purpose=_GRANTS_MAC_PURPOSE) else None


def _read_cached(user_id: int) -> tuple[str | None, tuple[str, str]]:
    """One round trip: the cached entry (if it was stored under the current versions and its MAC
    holds) and the current versions of the user's policies and of the role baselines."""
    redis = _redis()
    names = [cache.make_key(key) for key in (_grants_key(user_id), _user_version_key(user_id), _ROLES_VERSION_KEY)]
    raw, *found = redis.mget(names)
    versions = []
    for name, stored in zip(names[1:], found, strict=True):
        value = stored
        if value is None:
            # No version yet (or evicted): start a fresh one, so nothing cached before can be served.
            redis.set(name, uuid.uuid4().hex, nx=True)
            value = redis.get(name)
        versions.append(value.decode() if isinstance(value, bytes) else str(value))
    current = (versions[0], versions[1])
    grants = _authentic_grants(user_id, raw, current)
    if raw is not None and grants is None:
        redis.delete(names[0])  # stale, expired or forged: never served, and not kept
    return grants, current


def grants_for(user_id: int) -> Grants:
    """A user's grants: from Redis when cached under the current versions with a valid MAC, else
    from PostgreSQL (and then cached, tagged with the versions read before the rows: a write in
    between bumps a version, so such an entry is never served). Without an application secret
    nothing is cached: Redis alone cannot vouch for a permission."""
    if not settings.APP_ENV_APPLICATION_SECRET:
        return load_grants(user_id)
    if not _cache_usable():
        return _grants_without_redis(user_id)
    try:
        raw, versions = _read_cached(user_id)
    except Exception as exc:  # Redis down: decide from PostgreSQL (spec 7, the auth cache is off)
        _cache_failed(exc)
        return _grants_without_redis(user_id)
    if raw is not None:
        return Grants.from_json(user_id, raw)
    grants = load_grants(user_id)
    try:
        serialized = grants.to_json()
        until = int(time.time()) + settings.AUTHZ_CACHE_TTL_SECONDS
        tag = crypto.mac(_entry_data(user_id, versions, until, serialized), purpose=_GRANTS_MAC_PURPOSE)
        entry = {"user": versions[0], "roles": versions[1], "until": until, "grants": serialized, "mac": tag}
        _redis().set(cache.make_key(_grants_key(user_id)), json.dumps(entry), ex=settings.AUTHZ_CACHE_TTL_SECONDS)
    except Exception as exc:
        _cache_failed(exc)
    return grants


def _grants_without_redis(user_id: int) -> Grants:
    """While Redis is down: from PostgreSQL, and in a process that runs without Redis (inventory,
    spec 1.3) kept in process for AUTHZ_LOCAL_CACHE_TTL_SECONDS. With no shared version to bump, a
    change made in another process reaches this one only when the entry runs out: hence the short
    lifetime; a change made in this process clears the entries at once (_invalidate)."""
    if not redis_optional():
        return load_grants(user_id)
    local = caches["local"]
    grants = local.get(_grants_key(user_id))
    if grants is None:
        grants = load_grants(user_id)
        local.set(_grants_key(user_id), grants, timeout=settings.AUTHZ_LOCAL_CACHE_TTL_SECONDS)
    return grants


def _bump(keys: Iterable[str]) -> None:
    try:
        redis = _redis().pipeline(transaction=False)
        for key in keys:
            redis.set(cache.make_key(key), uuid.uuid4().hex)
        redis.execute()
    except Exception as exc:  # cached grants then expire after AUTHZ_CACHE_TTL_SECONDS
        _cache_failed(exc)


def _invalidate(key: str) -> None:
    # Bumped now and again after the commit: a request that read the old rows between the two
    # cached them under a version that the second bump retires.
    caches["local"].clear()
    _bump([key])
    transaction.on_commit(lambda: _bump([key]), using=POLICY_DB)


def invalidate_user(user_id: int | str) -> None:
    """Make the next request of this user re-read its policies."""
    _invalidate(_user_version_key(user_id))


def invalidate_roles() -> None:
    """Make every user re-read the role baselines."""
    _invalidate(_ROLES_VERSION_KEY)
