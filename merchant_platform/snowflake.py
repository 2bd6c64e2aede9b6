"""64-bit snowflake ids: 41 bits of milliseconds since EPOCH, 10 bits of worker id, 12 of sequence.

Two live processes must never share a worker id (spec 1.2.3), so every process that writes leases
its id in Redis (`SET NX` with a TTL, renewed by a daemon thread). A configured id
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

import redis
from django.conf import settings

from merchant_platform.logging import get_logger
from merchant_platform.registry import active_services, is_all_in_one

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

    def __init__(self, client: redis.Redis, worker_id: int, ttl_seconds: int):
        self.client = client
        self.worker_id = worker_id
        self.ttl_ms = ttl_seconds * 1000
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
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


def lease_worker_id() -> WorkerLease | None:
    """Lease this process's worker id; refuse to start if a configured id is taken."""
    configured, preferred, env_name = _process_worker_preference()
    if not settings.SNOWFLAKE_LEASE_ENABLED:
        return None
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    ttl = settings.SNOWFLAKE_LEASE_TTL_SECONDS
    if configured is not None:
        lease = WorkerLease(client, configured, ttl)
        if not lease.acquire():
            raise WorkerIdCollision(
                f"merchant-platform: snowflake worker id {configured} ({env_name}) is already leased by "
                f"{lease.holder()}; two processes with one id would write duplicate primary keys. "
                f"Give this process another {env_name}."
            )
    else:
        candidates = ([preferred] if preferred is not None else []) + list(DYNAMIC_RANGE)
        for worker_id in candidates:
            lease = WorkerLease(client, worker_id, ttl)
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
    if isinstance(lease, WorkerLease) and _state["pid"] == os.getpid():
        lease.release()
