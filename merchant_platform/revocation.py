"""Per-user "valid after" instants: tokens issued before a user's instant are refused at once.

Identity moves a user's instant forward when the password changes or is reset and when the account
is deactivated (`tokens_valid_after_move`). Every verifier refuses an access token whose `iat` is
earlier (`issued_before_cutoff`, called by merchant_platform.verification.tokens on each request), and
identity refuses refresh tokens created earlier, so a password change or a deactivation takes effect
on every service at once instead of when the last access token expires.

Where it lives: `public.token_cutoff` (TokenCutoff, reached through the `default` alias by every
service in both topologies) is the record; the shared Redis holds a copy per user, with an HMAC
under a key derived from APP_ENV_APPLICATION_SECRET; each process keeps what it read for up to
LOCAL_COPY_SECONDS (`local_copies`), so a user's instant costs at most one Redis read per second and
process. A move therefore takes effect at once in the process that made it and within
LOCAL_COPY_SECONDS in the others. A missing Redis copy, or one that fails its HMAC, is read again
from PostgreSQL and cached (also "no instant", so users who never changed anything cost no query). A
reader caches only where no copy exists (SET NX, and never over a later instant in the process) and
the writer overwrites after its commit, so a stale read never hides a newer instant. Redis down: the
check reads PostgreSQL (once a second per user and process); both down: the check is skipped and
logged (spec 7: existing tokens keep verifying).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django_redis import get_redis_connection
from redis import RedisError

from merchant_platform import crypto
from merchant_platform.logging import get_logger

log = get_logger(__name__)

DB = "default"
KEY_PREFIX = "mp:auth:valid-after"
# How long a copy is served before PostgreSQL is read again: bounds how stale a copy can be when
# the writer could not replace it (Redis unreachable at that moment).
COPY_TTL_SECONDS = 900
# How long a process serves what it read before reading Redis again: how late a move made in another
# process may take effect here (docs/authentication.md).
LOCAL_COPY_SECONDS = 1.0
# Past this many users, entries older than LOCAL_COPY_SECONDS are dropped (they would be read again
# anyway), so the copy's size follows the users seen in the last second.
_LOCAL_COPIES_PRUNE_AT = 10_000
_MAC_PURPOSE = "token-valid-after"
_NONE = "none"
_RETRY_AFTER_SECONDS = 5.0
_state = {"redis_down_until": 0.0}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class LocalCopies:
    """Each user's instant as this process last read it, served for LOCAL_COPY_SECONDS after the read
    began. Thread-safe: readers take one dict lookup (atomic), writers hold the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, tuple[float, int | None]] = {}

    def get(self, user_id: int) -> tuple[bool, int | None]:
        """(found, microseconds or None); not found when absent or older than LOCAL_COPY_SECONDS."""
        entry = self._entries.get(user_id)
        if entry is None or time.monotonic() - entry[0] >= LOCAL_COPY_SECONDS:
            return False, None
        return True, entry[1]

    def put(self, user_id: int, micros: int | None, *, read_at: float) -> None:
        """Keep `micros` as read at `read_at` (time.monotonic()), unless a later instant is held: a
        read that began before a move in this process must not replace the move's instant."""
        with self._lock:
            current = self._entries.get(user_id)
            if current is not None and current[1] is not None and (micros is None or micros < current[1]):
                return
            if len(self._entries) >= _LOCAL_COPIES_PRUNE_AT:
                oldest = time.monotonic() - LOCAL_COPY_SECONDS
                self._entries = {key: entry for key, entry in self._entries.items() if entry[0] > oldest}
            self._entries[user_id] = (read_at, micros)

    def clear(self) -> None:
        with self._lock:
            self._entries = {}


local_copies = LocalCopies()


def _key(user_id: int) -> str:
    return f"{KEY_PREFIX}:{user_id}"


def _seal(user_id: int, micros: int | None) -> str | None:
    value = _NONE if micros is None else str(micros)
    tag = crypto.mac(f"{user_id}:{value}".encode(), purpose=_MAC_PURPOSE)
    return None if tag is None else f"{value}.{tag}"


def _unseal(user_id: int, raw: bytes | None) -> tuple[bool, int | None]:
    """(found, microseconds since the epoch or None); not found when absent or forged."""
    if not raw:
        return False, None
    value, _, tag = raw.decode(errors="replace").partition(".")
    if not crypto.mac_verifies(f"{user_id}:{value}".encode(), tag, purpose=_MAC_PURPOSE):
        log.warning("auth.valid_after_copy_rejected", userId=str(user_id))
        return False, None
    return True, (None if value == _NONE else int(value))


def _micros(instant: datetime) -> int:
    return (instant - _EPOCH) // timedelta(microseconds=1)


def _from_database(user_id: int) -> int | None:
    from merchant_platform.models import TokenCutoff

    row = TokenCutoff.objects.using(DB).filter(user_id=user_id).values_list("valid_after", flat=True).first()
    return None if row is None else _micros(row)


def _redis_usable() -> bool:
    """Redis answered lately, and copies can be authenticated (without an application secret
    crypto.mac refuses, and the copy is not used at all)."""
    return bool(settings.APP_ENV_APPLICATION_SECRET) and time.monotonic() >= _state["redis_down_until"]


def _redis_failed(exc: Exception) -> None:
    _state["redis_down_until"] = time.monotonic() + _RETRY_AFTER_SECONDS
    log.warning("auth.valid_after_cache_unavailable", error=type(exc).__name__)


def _store(user_id: int, micros: int | None, *, only_if_absent: bool) -> None:
    """Cache a copy: a reader's only where none exists; the writer's always (tried even while Redis
    was seen down, since a copy it fails to replace may be served until COPY_TTL_SECONDS)."""
    sealed = _seal(user_id, micros)
    if sealed is None or (only_if_absent and not _redis_usable()):
        return
    try:
        get_redis_connection("default").set(_key(user_id), sealed, ex=COPY_TTL_SECONDS, nx=only_if_absent)
    except RedisError as exc:
        _redis_failed(exc)


def tokens_valid_after(user_id: int) -> int | None:
    """The user's instant in microseconds since the epoch, or None when no token of theirs is refused
    for its age. Raises DatabaseError only when Redis and PostgreSQL both fail."""
    found, micros = local_copies.get(user_id)
    if found:
        return micros
    read_at = time.monotonic()
    micros = _shared_valid_after(user_id)
    local_copies.put(user_id, micros, read_at=read_at)
    return micros


def _shared_valid_after(user_id: int) -> int | None:
    """The instant from the Redis copy, else from PostgreSQL (then cached in Redis)."""
    if _redis_usable():
        try:
            found, micros = _unseal(user_id, get_redis_connection("default").get(_key(user_id)))
        except RedisError as exc:
            _redis_failed(exc)
        else:
            if found:
                return micros
    micros = _from_database(user_id)
    _store(user_id, micros, only_if_absent=True)
    return micros


def issued_before_cutoff(user_id: int, issued_at: float) -> bool:
    """Was a token with this `iat` (seconds since the epoch) issued before the user's instant?"""
    try:
        micros = tokens_valid_after(user_id)
    except DatabaseError as exc:
        log.warning("auth.valid_after_unavailable", userId=str(user_id), error=type(exc).__name__)
        return False
    return micros is not None and float(issued_at) * 1_000_000 < micros


def tokens_valid_after_move(*, user_id: int, instant: datetime) -> None:
    """Refuse every token of `user_id` issued before `instant` (never moves the instant back).
    Committed on the `default` alias before returning; the Redis copy is replaced now and again
    after the commit, and this process's copy likewise."""
    from merchant_platform.models import TokenCutoff

    with transaction.atomic(using=DB):
        row, created = TokenCutoff.objects.using(DB).select_for_update().get_or_create(user_id=user_id, defaults={"valid_after": instant})
        if not created and row.valid_after < instant:
            row.valid_after = instant
            row.save(using=DB, update_fields=["valid_after", "updated_at"])
        micros = _micros(row.valid_after)
        _store_everywhere(user_id, micros)
        transaction.on_commit(lambda: _store_everywhere(user_id, micros), using=DB)


def _store_everywhere(user_id: int, micros: int) -> None:
    local_copies.put(user_id, micros, read_at=time.monotonic())
    _store(user_id, micros, only_if_absent=False)
