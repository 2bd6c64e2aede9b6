"""Item 7: live and ready probes where spec 4.1 puts them; readyz names the dependency that failed."""

from __future__ import annotations

import json

import pytest

from merchant_platform.registry import BROKER, STORAGE, active_services, get_service
from tests.kernel.conftest import database_url, python_command, run_all
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(databases="__all__")

# Probe through the Django test client in a process of its own (its own settings and topology).
PROBE = """
import json, sys, time, django
django.setup()
from django.test import Client
client = Client(SERVER_NAME="localhost")  # development settings: loopback host names only
results = {}
for path in sys.argv[1:]:
    started = time.monotonic()
    response = client.get(path)
    results[path] = {"status": response.status_code, "body": response.json(), "seconds": time.monotonic() - started}
print("RESULT=" + json.dumps(results))
"""


OUTREACH_DOWN, DATABASE_DOWN, SPLIT_LEDGER = "outreach database down", "shared database down", "split ledger"


@pytest.fixture(scope="module")
def probed(django_db_setup) -> dict[str, dict]:
    """Probe three processes at once: outreach's database down, the shared database down, and a split
    ledger process; each on the test database, with the connection pool production uses."""
    healthy = database_url()
    scenarios = {
        OUTREACH_DOWN: (
            ["/readyz", "/v1/api/outreach/readyz", "/v1/api/identity/readyz", "/healthz", "/v1/api/outreach/healthz"],
            {"DATABASE_URL": healthy, "OUTREACH_DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/nowhere"},
        ),
        DATABASE_DOWN: (
            ["/readyz", "/v1/api/licensing/readyz", "/healthz"],
            {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/x"},
        ),
        SPLIT_LEDGER: (
            ["/healthz", "/readyz", "/v1/api/ledger/healthz", "/v1/api/ledger/readyz", "/v1/api/outreach/healthz", "/admin/login/"],
            {"DATABASE_URL": healthy, "APP_SERVICE": "ledger"},
        ),
    }
    results = run_all(*((python_command(PROBE.replace("sys.argv[1:]", repr(paths))), env) for paths, env in scenarios.values()))
    probed = {}
    for name, result in zip(scenarios, results, strict=True):
        assert result.returncode == 0, result.stderr
        line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT="))
        probed[name] = {**json.loads(line.removeprefix("RESULT=")), "stdout": result.stdout}
    return probed


def test_every_service_answers_its_probes_under_its_prefix(client):
    for service in active_services():
        live = client.get(f"{service.prefix}/healthz")
        assert (live.status_code, live.json()) == (200, {"status": "ok"}), service.name
        ready = client.get(f"{service.prefix}/readyz")
        assert ready.status_code == 200, (service.name, ready.json())
        assert ready.json()["status"] == "ready"
        assert f"database:{service.db_alias}" in ready.json()["checks"] or "database" not in service.dependencies


def test_root_probes_cover_the_whole_process(client):
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.json()
    checks = ready.json()["checks"]
    assert {"database:default", "redis", "broker", "storage"} <= set(checks)
    assert {f"database:{service.db_alias}" for service in active_services()} <= set(checks)
    assert set(checks.values()) == {"ok"}


def test_signal_live_check_is_public_health(client):
    response = client.get(f"{get_service('signal').prefix}/health")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_redis_down_fails_readyz_and_names_it(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    ready = client.get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["status"] == "unavailable"
    assert body["failed"] == ["redis"]
    assert body["checks"]["redis"] == "error: ConnectionError"  # its kind only: no host, port or user to anonymous callers
    assert client.get(f"{get_service('outreach').prefix}/readyz").json()["failed"] == ["redis"]
    assert client.get("/healthz").status_code == 200
    assert client.get(f"{get_service('outreach').prefix}/healthz").status_code == 200


def test_broker_down_fails_readyz_of_services_that_need_it(client, settings):
    settings.KAFKA_BOOTSTRAP_SERVERS = [f"127.0.0.1:{free_port()}"]
    for service in active_services():
        ready = client.get(f"{service.prefix}/readyz")
        if BROKER in service.dependencies:
            assert (ready.status_code, ready.json()["failed"]) == (503, ["broker"]), service.name
        else:
            assert ready.status_code == 200, service.name
        assert client.get(f"{service.prefix}/healthz").status_code == 200
    assert client.get("/readyz").json()["failed"] == ["broker"]


def test_storage_down_fails_readyz_of_services_that_need_it(client, settings):
    settings.S3_ENDPOINT_URL = f"http://127.0.0.1:{free_port()}"
    for service in active_services():
        ready = client.get(f"{service.prefix}/readyz")
        expected = (503, ["storage"]) if STORAGE in service.dependencies else (200, None)
        assert (ready.status_code, ready.json().get("failed")) == expected, service.name


def test_database_down_fails_readyz_quickly_and_healthz_stays_up(probed):
    results = probed[OUTREACH_DOWN]
    assert results["/v1/api/outreach/readyz"]["status"] == 503
    assert results["/v1/api/outreach/readyz"]["body"]["failed"] == ["database:outreach"]
    assert results["/readyz"]["body"]["failed"] == ["database:outreach"]
    assert results["/v1/api/identity/readyz"]["status"] == 200
    assert results["/healthz"]["status"] == results["/v1/api/outreach/healthz"]["status"] == 200
    # A probe waits its own 2 s timeout, not the pool's 10 s (DB_POOL_TIMEOUT).
    assert results["/readyz"]["seconds"] < 8
    assert results["/v1/api/outreach/readyz"]["seconds"] < 8


def test_shared_database_down_fails_every_readyz(probed):
    results = probed[DATABASE_DOWN]
    assert results["/readyz"]["status"] == 503
    assert "database:default" in results["/readyz"]["body"]["failed"]
    assert results["/v1/api/licensing/readyz"]["body"]["failed"] == ["database:licensing"]
    assert results["/healthz"]["status"] == 200


def test_split_mode_serves_only_its_service_and_root_probes(probed):
    results = probed[SPLIT_LEDGER]
    assert results["/healthz"]["status"] == results["/v1/api/ledger/healthz"]["status"] == 200
    assert results["/readyz"]["status"] == 200, results["/readyz"]
    assert set(results["/readyz"]["body"]["checks"]) == {"database:default", "database:ledger", "redis", "broker", "storage"}
    assert results["/v1/api/ledger/readyz"]["status"] == 200
    assert results["/v1/api/outreach/healthz"]["status"] == 404
    assert results["/admin/login/"]["status"] == 404
    # Each request was one key=value line on the process's stdout.
    request_lines = [line for line in results["stdout"].splitlines() if "event='request'" in line]
    assert len(request_lines) == 6
    assert all("requestId='" in line and "durationMs=" in line for line in request_lines)
    assert "path='/v1/api/outreach/healthz' status=404" in request_lines[4]
