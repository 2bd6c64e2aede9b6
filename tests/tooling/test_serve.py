"""`manage.py serve`: the process set per topology, RUN_MODE, the worker-id rule, and one-line
refusals (a busy port, an unknown RUN_MODE)."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from merchant_platform.management.commands.serve import Command, addresses, default_roles, has_websocket_routes
from merchant_platform.registry import all_services
from tests.support.ports import free_port, wait_for_port
from tests.tooling.conftest import PORTS, ROOT, platform_env, stop


def test_all_in_one_runs_servers_and_background_processes():
    assert default_roles(all_services(), all_in_one=True, commands=set()) == ["web", "internal", "ws", "worker", "beat"]
    assert default_roles(all_services(), all_in_one=True, commands={"consume", "cdc"}) == [
        *("web", "internal", "ws", "worker", "beat", "consume", "cdc")
    ]


def test_all_in_one_answers_calls_between_services_on_a_listener_of_their_own(monkeypatch):
    """A placing holds a thread of `web` while it calls taxation, inventory and payment: those calls
    go to the internal listener, never back into `web`'s pool (which concurrent placings could fill)."""
    monkeypatch.setenv("APP_ENV_NODE_ID", "7")
    monkeypatch.setenv("WEB_CONCURRENCY", "1")
    where = addresses(all_in_one=True)
    programs = {program.name: program for program in Command().plan(where, all_in_one=True, roles="web,internal", gateway=False)}
    assert f"--port={where.wsgi_port}" in programs["web"].argv
    assert f"--port={settings.INTERNAL_WSGI_PORT}" in programs["internal"].argv
    assert programs["internal"].env == {"APP_ENV_NODE_ID": ""}  # the configured id names `web` alone
    assert settings.SERVICE_BASE_URL == f"http://127.0.0.1:{settings.INTERNAL_WSGI_PORT}"
    for sibling in (
        "COMMERCE_INVENTORY_URL",
        "COMMERCE_TAXATION_URL",
        "COMMERCE_PAYMENT_URL",
        "COMMERCE_FINANCE_URL",
        "PAYMENT_FINANCE_URL",
        "LEDGER_FINANCE_URL",
        "TAXATION_COMMERCE_URL",
    ):
        assert getattr(settings, sibling).startswith(settings.SERVICE_BASE_URL + "/v1/api/"), sibling


@pytest.mark.parametrize("service", all_services(), ids=lambda service: service.name)
def test_split_mode_runs_the_wsgi_server_and_only_the_roles_the_service_has(service):
    roles = default_roles((service,), all_in_one=False, commands={"consume", "cdc"})
    assert roles[0] == "web"
    assert ("ws" in roles) == has_websocket_routes(service)
    assert roles[-2:] == ["consume", "cdc"]
    assert "gateway" not in roles


def test_a_configured_worker_id_goes_to_the_wsgi_server_alone(monkeypatch):
    monkeypatch.setenv("APP_ENV_NODE_ID", "7")
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    web_env, others_env = Command().worker_id_environments("APP_ENV_NODE_ID")
    assert web_env["WEB_CONCURRENCY"] == "1"
    assert int(web_env["WEB_THREADS"]) > 1
    assert others_env == {"APP_ENV_NODE_ID": ""}  # set but empty: a free id (merchant_platform.snowflake)

    monkeypatch.setenv("WEB_CONCURRENCY", "4")
    with pytest.raises(CommandError, match="names one process"):
        Command().worker_id_environments("APP_ENV_NODE_ID")


@pytest.mark.parametrize(("configured", "pool"), [({}, "prefork"), ({"CELERY_POOL": "threads", "CELERY_CONCURRENCY": "16"}, "threads")])
def test_the_celery_worker_runs_the_configured_pool(monkeypatch, configured, pool):
    for name, value in configured.items():
        monkeypatch.setenv(name, value)
    [worker] = Command().plan(addresses(all_in_one=True), all_in_one=True, roles="worker", gateway=False)
    argv = " ".join(worker.argv)
    assert f"--pool {pool}" in argv and f"--concurrency {configured.get('CELERY_CONCURRENCY', '2')}" in argv


def test_no_configured_worker_id_leaves_the_environment_alone(monkeypatch):
    monkeypatch.delenv("APP_ENV_SNOWFLAKE_WORKER_ID", raising=False)
    assert Command().worker_id_environments("APP_ENV_SNOWFLAKE_WORKER_ID") == ({}, {})


def run_serve(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "serve", *args],
        cwd=ROOT,
        env=platform_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.django_db(databases="__all__")
def test_run_mode_migrate_migrates_seeds_and_exits_zero():
    test_database = settings.DATABASES["default"]["NAME"]
    url = f"postgres://{settings.DATABASES['default']['USER']}@127.0.0.1:5432/{test_database}"
    result = run_serve(RUN_MODE="migrate", DATABASE_URL=url)
    assert result.returncode == 0, result.stderr
    assert "seeded:" in result.stdout


def test_an_unknown_run_mode_is_a_one_line_refusal():
    result = run_serve(RUN_MODE="sideways")
    assert result.returncode == 1
    assert result.stderr.strip() == "CommandError: RUN_MODE must be 'startup' or 'migrate', got 'sideways'"


def test_a_busy_port_is_a_one_line_refusal():
    port = free_port(PORTS)
    with socket.socket() as occupant:
        occupant.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        occupant.bind(("127.0.0.1", port))
        occupant.listen()
        result = run_serve("--roles", "web", WSGI_PORT=str(port))
    assert result.returncode == 1
    assert result.stderr.strip() == f"CommandError: port {port} (web) on 127.0.0.1 is already in use: is the platform already running?"


def test_the_gateway_is_refused_in_split_mode():
    result = run_serve("--gateway", APP_SERVICE="inventory")
    assert result.returncode == 1
    assert "only in all-in-one mode" in result.stderr


def test_the_internal_listener_is_refused_in_split_mode():
    result = run_serve("--roles", "web,internal", APP_SERVICE="inventory")
    assert result.returncode == 1
    assert "only in all-in-one mode" in result.stderr


def test_a_configured_worker_id_held_elsewhere_stops_serve_with_the_reason():
    import redis as redis_client

    worker_id = 1000 + free_port(PORTS) % 20  # high in the dynamic range, which processes fill from the bottom
    client = redis_client.Redis.from_url(settings.REDIS_URL)
    key = f"snowflake:worker:{worker_id}"
    client.set(key, "another-host:1:test", px=60_000)
    try:
        result = run_serve("--roles", "web", APP_ENV_NODE_ID=str(worker_id), WSGI_PORT=str(free_port(PORTS)))
    finally:
        client.delete(key)
    assert result.returncode != 0
    assert f"snowflake worker id {worker_id} (APP_ENV_NODE_ID) is already leased by another-host:1:test" in result.stderr + result.stdout


def test_the_asgi_server_releases_its_snowflake_lease_at_shutdown(tmp_path, start_process):
    """Issue 24 item 10: uvicorn ends its process by re-raising SIGTERM, so atexit never released the
    lease; the ASGI lifespan's shutdown does."""
    import redis as redis_client

    call_command("generate_signing_key", "--dir", str(tmp_path / "keys"), stdout=io.StringIO())
    worker_id, port = 1000 + free_port(PORTS) % 20, free_port(PORTS)  # high in the range, as above
    key = f"snowflake:worker:{worker_id}"
    client = redis_client.Redis.from_url(settings.REDIS_URL)
    client.delete(key)
    env = platform_env(
        APP_ENV_NODE_ID=str(worker_id),
        ASGI_PORT=str(port),
        IDENTITY_SIGNING_KEY_PATH=str(tmp_path / "keys"),
        DEV_CREDENTIALS_DIR=str(tmp_path / "dev"),
    )
    process = start_process([sys.executable, "manage.py", "serve", "--role", "ws"], env=env)
    try:
        try:
            wait_for_port(port, process=process, seconds=60)
        except AssertionError as failure:
            raise AssertionError(process.log.read_text()) from failure
        holder = client.get(key)
        assert holder is not None and f":{process.pid}:" in holder.decode()
        stop(process)
        deadline = time.monotonic() + 5
        while client.exists(key) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not client.exists(key), process.log.read_text()
        assert "process.stop" in process.log.read_text()
    finally:
        client.delete(key)
