"""64-bit snowflake ids: 41 bits of milliseconds since EPOCH, 10 bits of worker id, 12 of sequence.

Two live processes must never share a worker id (spec 1.2.3), so every process that writes leases
its id in Redis (`SET NX` with a TTL, renewed by a daemon thread). A process whose services all run
without Redis (inventory, spec 1.3: `optional_dependencies`) leases it in PostgreSQL too (the
`snowflake_lease` table, same TTL and renewal): while Redis does not answer, that lease alone keeps
those processes unique, and the Redis lease is taken again once Redis is back. A configured id
(APP_ENV_NODE_ID, or APP_ENV_SNOWFLAKE_WORKER_ID for taxation) that another process holds stops this
one with a clear message; without a configured id the process takes the service's default id if it
is free, else any free id (only a free one when the variable is set but empty: `serve`'s other
programs). The lease is re-taken after a fork, so pre-forking servers stay unique.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
import time
import uuid

import psycopg
import redis
from django.conf import settings
from django.db import connections

from merchant_platform.logging import get_logger
from merchant_platform.registry import active_services, is_all_in_one, redis_optional

EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
WORKER_BITS, SEQUENCE_BITS = 10, 12
MAX_WORKER_ID = (1 << WORKER_BITS) - 1
MAX_SEQUENCE = (1 << SEQUENCE_BITS) - 1
LEASE_KEY = "snowflake:worker:{}"
# Ids taken when none is configured and the service's default is busy (spec defaults are below 128).
DYNAMIC_RANGE = range(128, MAX_WORKER_ID + 1)

log = get_logger(__name__)

_RENEW_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class WorkerIdCollision(SystemExit):
    """The configured worker id is leased by another live process: this one must not start."""


class SnowflakeGenerator:
    """Thread-safe generator of ids for one worker id."""

    def __init__(self, worker_id: int):
        if not 0 <= worker_id <= MAX_WORKER_ID:
            raise ValueError(f"worker id must be within 0..{MAX_WORKER_ID}, got {worker_id}")
        self.worker_id = worker_id
        self._lock = threading.Lock()
        self._last_ms = -1
        self._sequence = 0

    def next_id(self) -> int:
        with self._lock:
            now = int(time.time() * 1000)
            now = max(now, self._last_ms)  # a clock that stepped back must not reorder ids
            if now == self._last_ms:
                self._sequence = (self._sequence + 1) & MAX_SEQUENCE
                if self._sequence == 0:
                    while now <= self._last_ms:
                        now = int(time.time() * 1000)
            else:
                self._sequence = 0
            self._last_ms = now
            return ((now - EPOCH_MS) << (WORKER_BITS + SEQUENCE_BITS)) | (self.worker_id << SEQUENCE_BITS) | self._sequence


def parse(snowflake: int) -> dict[str, int]:
    return {
        "timestamp_ms": (snowflake >> (WORKER_BITS + SEQUENCE_BITS)) + EPOCH_MS,
        "worker_id": (snowflake >> SEQUENCE_BITS) & MAX_WORKER_ID,
        "sequence": snowflake & MAX_SEQUENCE,
    }


class WorkerLease:
    """A worker id held in Redis for as long as this process lives."""

    def __init__(self, client: redis.Redis, worker_id: int, ttl_seconds: int, token: str | None = None):
        self.client = client
        self.worker_id = worker_id
        self.ttl_ms = ttl_seconds * 1000
        self.token = token or _lease_token()
        self._stop = threading.Event()

    def acquire(self) -> bool:
        return bool(self.client.set(LEASE_KEY.format(self.worker_id), self.token, nx=True, px=self.ttl_ms))

    def holder(self) -> str:
        value = self.client.get(LEASE_KEY.format(self.worker_id))
        return value.decode() if value else "nobody"

    def start_renewing(self) -> None:
        thread = threading.Thread(target=self._renew_loop, name=f"snowflake-lease-{self.worker_id}", daemon=True)
        thread.start()

    def _renew_loop(self) -> None:
        key = LEASE_KEY.format(self.worker_id)
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                if not self.client.eval(_RENEW_SCRIPT, 1, key, self.token, self.ttl_ms) and not self.acquire():
                    log.critical("snowflake.lease_lost", workerId=self.worker_id, holder=self.holder())
            except redis.RedisError as exc:
                log.warning("snowflake.lease_renew_failed", workerId=self.worker_id, error=str(exc))

    def release(self) -> None:
        self._stop.set()
        # Without Redis the lease still ends when its TTL runs out.
        with contextlib.suppress(redis.RedisError):
            self.client.eval(_RELEASE_SCRIPT, 1, LEASE_KEY.format(self.worker_id), self.token)


def _lease_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PostgresWorkerLease:
    """The same lease as a row of `snowflake_lease` (merchant_platform.models.SnowflakeLease) in the
    shared `public` schema. Expiry is the database's clock, so the processes' clocks do not matter.
    Each statement runs on a connection of its own in autocommit: never inside a caller's
    transaction (a rollback would drop the lease), never holding a pooled connection."""

    def __init__(self, worker_id: int, ttl_seconds: int, token: str):
        self.worker_id = worker_id
        self.ttl_ms = ttl_seconds * 1000
        self.token = token
        self._stop = threading.Event()

    def _execute(self, sql: str, params: list) -> list[tuple]:
        """The rows `sql` (each statement ends in RETURNING) answers."""
        with psycopg.connect(**connections["default"].get_connection_params(), autocommit=True) as connection:
            return connection.execute(sql, params).fetchall()

    def acquire(self) -> bool:
        # Taken when free or expired; a live holder's row is left alone (the WHERE of DO UPDATE).
        return bool(
            self._execute(
                "INSERT INTO snowflake_lease (worker_id, holder, expires_at) VALUES (%s, %s, now() + %s * interval '1 millisecond') "
                "ON CONFLICT (worker_id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at "
                "WHERE snowflake_lease.expires_at < now() RETURNING holder",
                [self.worker_id, self.token, self.ttl_ms],
            )
        )

    def holder(self) -> str:
        rows = self._execute("SELECT holder FROM snowflake_lease WHERE worker_id = %s AND expires_at >= now()", [self.worker_id])
        return rows[0][0] if rows else "nobody"

    def start_renewing(self) -> None:
        thread = threading.Thread(target=self._renew_loop, name=f"snowflake-pg-lease-{self.worker_id}", daemon=True)
        thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                renewed = self._execute(
                    "UPDATE snowflake_lease SET expires_at = now() + %s * interval '1 millisecond' "
                    "WHERE worker_id = %s AND holder = %s RETURNING holder",
                    [self.ttl_ms, self.worker_id, self.token],
                )
                if not renewed and not self.acquire():
                    log.critical("snowflake.lease_lost", workerId=self.worker_id, holder=self.holder(), store="postgresql")
            except psycopg.Error as exc:
                log.warning("snowflake.lease_renew_failed", workerId=self.worker_id, error=str(exc), store="postgresql")

    def release(self) -> None:
        self._stop.set()
        # Without PostgreSQL the lease still ends when its expiry passes.
        with contextlib.suppress(psycopg.Error):
            self._execute("DELETE FROM snowflake_lease WHERE worker_id = %s AND holder = %s RETURNING holder", [self.worker_id, self.token])


class JointLease:
    """One worker id held in PostgreSQL and in Redis, for a process that runs without Redis: taken
    only if PostgreSQL grants it and Redis does not refuse it. While Redis does not answer the id is
    held in PostgreSQL alone, and the Redis lease's renewal takes the key once Redis is back, so the
    processes of other services (which lease in Redis only) see it again."""

    def __init__(self, postgres: PostgresWorkerLease, redis_lease: WorkerLease):
        self.postgres, self.redis = postgres, redis_lease
        self.worker_id, self.token = postgres.worker_id, postgres.token

    def acquire(self) -> bool:
        if not self.postgres.acquire():
            return False
        try:
            if self.redis.acquire():
                return True
        except redis.RedisError as exc:
            log.warning("snowflake.lease_in_postgresql_only", workerId=self.worker_id, error=type(exc).__name__)
            return True
        self.postgres.release()  # held in Redis by a process of another service
        return False

    def holder(self) -> str:
        holder = self.postgres.holder()
        if holder == "nobody":
            with contextlib.suppress(redis.RedisError):
                holder = self.redis.holder()
        return holder

    def start_renewing(self) -> None:
        self.postgres.start_renewing()
        self.redis.start_renewing()

    def release(self) -> None:
        self.redis.release()
        self.postgres.release()


def configured_worker_id(env_name: str = "APP_ENV_NODE_ID") -> int | None:
    raw = os.environ.get(env_name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"merchant-platform: {env_name} must be an integer 0..{MAX_WORKER_ID}, got {raw!r}") from None


def _process_worker_preference() -> tuple[int | None, int | None, str]:
    """(configured id, preferred default id, the variable that configures it) for this process."""
    if is_all_in_one():
        return configured_worker_id("APP_ENV_NODE_ID"), None, "APP_ENV_NODE_ID"
    service = active_services()[0]
    # Set but empty: `serve` gave the configured id to another of its programs, so this one takes a
    # free id rather than race that program (or the service's other replicas) for the default.
    preferred = None if os.environ.get(service.worker_id_env) == "" else service.worker_id
    return configured_worker_id(service.worker_id_env), preferred, service.worker_id_env


def _lease_factory(client: redis.Redis):
    """How this process leases an id: in Redis; for a process whose services all run without Redis,
    in PostgreSQL and Redis together (JointLease)."""
    ttl = settings.SNOWFLAKE_LEASE_TTL_SECONDS
    if not redis_optional():
        return lambda worker_id: WorkerLease(client, worker_id, ttl)

    def joint(worker_id: int) -> JointLease:
        token = _lease_token()
        return JointLease(PostgresWorkerLease(worker_id, ttl, token), WorkerLease(client, worker_id, ttl, token))

    return joint


def lease_worker_id() -> WorkerLease | JointLease | None:
    """Lease this process's worker id; refuse to start if a configured id is taken."""
    configured, preferred, env_name = _process_worker_preference()
    if not settings.SNOWFLAKE_LEASE_ENABLED:
        return None
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    new_lease = _lease_factory(client)
    if configured is not None:
        lease = new_lease(configured)
        if not lease.acquire():
            raise WorkerIdCollision(
                f"merchant-platform: snowflake worker id {configured} ({env_name}) is already leased by "
                f"{lease.holder()}; two processes with one id would write duplicate primary keys. "
                f"Give this process another {env_name}."
            )
    else:
        candidates = ([preferred] if preferred is not None else []) + list(DYNAMIC_RANGE)
        for worker_id in candidates:
            lease = new_lease(worker_id)
            if lease.acquire():
                break
        else:
            raise WorkerIdCollision("merchant-platform: no free snowflake worker id is left to lease")
    lease.start_renewing()
    log.info("snowflake.worker_leased", workerId=lease.worker_id, holder=lease.token)
    return lease


_state_lock = threading.Lock()
_state: dict[str, object] = {"pid": None, "generator": None, "lease": None}


def claim() -> SnowflakeGenerator:
    """The process's generator; leases the worker id on first use and again after a fork."""
    pid = os.getpid()
    if _state["pid"] == pid:
        return _state["generator"]  # type: ignore[return-value]
    with _state_lock:
        if _state["pid"] != pid:
            lease = lease_worker_id()
            if lease is None:
                configured, preferred, _ = _process_worker_preference()
                worker_id = configured if configured is not None else (preferred if preferred is not None else 0)
            else:
                worker_id = lease.worker_id
            _state.update(pid=pid, generator=SnowflakeGenerator(worker_id), lease=lease)
            if lease is not None:
                atexit.register(release)
    return _state["generator"]  # type: ignore[return-value]


def next_id() -> int:
    return claim().next_id()


def release() -> None:
    lease = _state.get("lease")
    if lease is not None and _state["pid"] == os.getpid():
        lease.release()
