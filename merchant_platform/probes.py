"""Live and ready probes (spec 1.2.4 and 4.1).

`healthz` answers as long as the process does. `readyz` checks the real dependencies of the
services the view covers (database alias, Redis, broker, object storage) with short timeouts and
answers 503 naming each one that failed; a failed dependency that every covered service declares
optional (`optional_dependencies`: inventory's Redis, spec 1.3) leaves it ready, status "degraded"
(200, named in `degraded`).
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import redis
from django.conf import settings
from django.db import connections
from django.http import HttpResponse, JsonResponse

from merchant_platform.logging import get_logger
from merchant_platform.registry import BROKER, DATABASE, REDIS, STORAGE, Service, active_services

log = get_logger(__name__)

CHECK_TIMEOUT_SECONDS = 2.0


def _tcp_check(host: str, port: int) -> None:
    socket.create_connection((host, port), timeout=CHECK_TIMEOUT_SECONDS).close()


def check_database(alias: str) -> None:
    connection = connections[alias]
    pool = getattr(connection, "pool", None)
    if pool is not None:
        # Through the alias's pool, but waiting only the probe's timeout (not DB_POOL_TIMEOUT).
        pool.open()
        with pool.connection(timeout=CHECK_TIMEOUT_SECONDS) as pooled:
            pooled.execute("SELECT 1")
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def check_redis() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=CHECK_TIMEOUT_SECONDS, socket_timeout=CHECK_TIMEOUT_SECONDS)
    try:
        client.ping()
    finally:
        client.close()


def check_broker() -> None:
    """At least one bootstrap server accepts a connection."""
    if not settings.KAFKA_BOOTSTRAP_SERVERS:
        raise RuntimeError("no broker configured (KAFKA_BOOTSTRAP_SERVERS is empty)")
    errors = []
    for server in settings.KAFKA_BOOTSTRAP_SERVERS:
        host, _, port = server.rpartition(":")
        try:
            _tcp_check(host or server, int(port or 9092))
            return
        except OSError as exc:
            errors.append(f"{server}: {exc}")
    raise RuntimeError("; ".join(errors))


def check_storage() -> None:
    parsed = urlparse(settings.S3_ENDPOINT_URL)
    _tcp_check(parsed.hostname or "127.0.0.1", parsed.port or (443 if parsed.scheme == "https" else 80))


def _checks_for(services: tuple[Service, ...], *, include_default: bool = False) -> dict[str, callable]:
    checks: dict[str, callable] = {}
    if include_default:
        checks["database:default"] = lambda: check_database("default")
    for service in services:
        if DATABASE in service.dependencies:
            checks[f"database:{service.db_alias}"] = lambda alias=service.db_alias: check_database(alias)
        if REDIS in service.dependencies:
            checks["redis"] = check_redis
        if BROKER in service.dependencies:
            checks["broker"] = check_broker
        if STORAGE in service.dependencies:
            checks["storage"] = check_storage
    return checks


_CHECK_NAMES = {REDIS: "redis", BROKER: "broker", STORAGE: "storage"}


def _optional_checks(services: tuple[Service, ...]) -> set[str]:
    """The checks whose failure only degrades: optional for every covered service that has them."""
    return {
        name
        for dependency, name in _CHECK_NAMES.items()
        if any(dependency in s.dependencies for s in services)
        and all(dependency in s.optional_dependencies for s in services if dependency in s.dependencies)
    }


def _run(name_and_check):
    name, check = name_and_check
    try:
        check()
        return name, "ok"
    except Exception as exc:  # a probe reports every failure; it never raises
        # The answer is anonymous: it names the failure's kind; the text (hosts, users) goes to the log.
        log.warning("probe.failed", check=name, error=f"{type(exc).__name__}: {exc}"[:500])
        return name, f"error: {type(exc).__name__}"
    finally:
        if name.startswith("database:"):
            connections[name.split(":", 1)[1]].close()


def readiness(services: tuple[Service, ...], *, include_default: bool = False) -> tuple[str, dict[str, str]]:
    """("ready", "degraded" or "unavailable", each check's result). Every check runs at once, so a
    probe takes one timeout however many dependencies fail."""
    checks = _checks_for(services, include_default=include_default)
    with ThreadPoolExecutor(max_workers=max(1, len(checks))) as pool:
        results = dict(pool.map(_run, checks.items()))
    failed = {name for name, value in results.items() if value != "ok"}
    if not failed:
        return "ready", results
    return ("degraded" if failed <= _optional_checks(services) else "unavailable"), results


HEALTHY = b'{"status":"ok"}'


def healthz_view(request):
    return HttpResponse(HEALTHY, content_type="application/json")


def readyz_view_for(services: tuple[Service, ...] | None):
    """A service's readyz; with None, the process-wide one (every active service plus `default`)."""

    def readyz_view(request):
        if services is None:
            status, results = readiness(active_services(), include_default=True)
        else:
            status, results = readiness(services)
        failed = sorted(name for name, value in results.items() if value != "ok")
        body = {"status": status, "checks": results}
        if failed:
            body["degraded" if status == "degraded" else "failed"] = failed
        return JsonResponse(body, status=503 if status == "unavailable" else 200)

    return readyz_view
