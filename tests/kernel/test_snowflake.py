"""Item 5: snowflake ids: generator, per-worker order, the Redis lease and ids as JSON strings."""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time

import pytest
import redis
from django.conf import settings

from merchant_platform import snowflake
from merchant_platform.serializers import SnowflakeField
from tests.kernel.conftest import python_command, run_all, start_at_root
from tests.kernel.sample.models import Widget
from tests.support.ports import free_port

IDS_PER_THREAD = 250_000

# A process that starts like every platform process, reports its worker id, and lives until its
# stdin closes.
HOLD_LEASE = """
import sys, django
django.setup()
from merchant_platform import lifecycle, snowflake
lifecycle.process_start("kernel-test")
print(f"WORKER_ID={snowflake.claim().worker_id}", flush=True)
sys.stdin.read()
"""


def test_a_million_ids_from_threads_are_unique_and_ordered_per_worker():
    generators = [snowflake.SnowflakeGenerator(worker_id) for worker_id in (3, 700)]
    results: dict[int, list[int]] = {}

    def produce(index: int) -> None:
        next_id = generators[index % len(generators)].next_id
        results[index] = [next_id() for _ in range(IDS_PER_THREAD)]

    threads = [threading.Thread(target=produce, args=(index,)) for index in range(4)]
    started_ms = int(time.time() * 1000)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished_ms = int(time.time() * 1000)

    every_id = [value for ids in results.values() for value in ids]
    assert len(every_id) == 1_000_000
    assert len(set(every_id)) == 1_000_000
    for index, ids in results.items():
        assert all(a < b for a, b in itertools.pairwise(ids)), f"thread {index} saw ids go backwards"
        worker_id = generators[index % len(generators)].worker_id
        first, last = snowflake.parse(ids[0]), snowflake.parse(ids[-1])
        assert first["worker_id"] == last["worker_id"] == worker_id
        assert started_ms <= first["timestamp_ms"] <= last["timestamp_ms"] <= finished_ms
    assert 0 < max(every_id) < 2**63


def test_generator_bounds_and_parse_round_trip():
    with pytest.raises(ValueError):
        snowflake.SnowflakeGenerator(snowflake.MAX_WORKER_ID + 1)
    value = snowflake.SnowflakeGenerator(snowflake.MAX_WORKER_ID).next_id()
    parsed = snowflake.parse(value)
    assert parsed["worker_id"] == snowflake.MAX_WORKER_ID
    assert abs(parsed["timestamp_ms"] - time.time() * 1000) < 5_000


@pytest.fixture
def lease_client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


def _worker_id(stdout: str) -> int:
    return int(next(line for line in stdout.splitlines() if line.startswith("WORKER_ID=")).split("=", 1)[1])


def _start_holder(**env: str) -> tuple[subprocess.Popen, int]:
    holder = start_at_root(python_command(HOLD_LEASE), env, stdin=subprocess.PIPE)
    for line in holder.stdout:
        if line.startswith("WORKER_ID="):
            return holder, _worker_id(line)
    holder.wait(timeout=10)
    raise AssertionError(f"the first process did not start: {holder.stderr.read()}")


def _stop_holder(holder: subprocess.Popen) -> None:
    holder.stdin.close()  # a clean exit releases the lease (atexit)
    try:
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_second_process_with_a_leased_worker_id_refuses_to_start(lease_client):
    # Split mode, taxation: its default worker id (13) unless a live process holds it.
    default_was_free = not lease_client.exists(snowflake.LEASE_KEY.format(13))
    holder, held_id = _start_holder(APP_SERVICE="taxation")
    try:
        if default_was_free:
            assert held_id == 13
        assert lease_client.get(snowflake.LEASE_KEY.format(held_id)).decode().split(":")[1] == str(holder.pid)
        same_variable, other_service, without_id = run_all(
            (python_command(HOLD_LEASE), {"APP_SERVICE": "taxation", "APP_ENV_SNOWFLAKE_WORKER_ID": str(held_id)}),
            (python_command(HOLD_LEASE), {"APP_SERVICE": "licensing", "APP_ENV_NODE_ID": str(held_id)}),
            (python_command(HOLD_LEASE), {"APP_SERVICE": "taxation"}),
        )
    finally:
        _stop_holder(holder)

    for refused, variable in ((same_variable, "APP_ENV_SNOWFLAKE_WORKER_ID"), (other_service, "APP_ENV_NODE_ID")):
        assert refused.returncode == 1
        message = refused.stderr.strip().splitlines()
        assert len(message) == 1, refused.stderr
        assert message[0].startswith(f"merchant-platform: snowflake worker id {held_id} ({variable}) is already leased by ")
        assert message[0].endswith(f"Give this process another {variable}.")
        assert "WORKER_ID=" not in refused.stdout
    # Without a configured id the process takes a free one instead of the busy default.
    assert without_id.returncode == 0, without_id.stderr
    assert _worker_id(without_id.stdout) in snowflake.DYNAMIC_RANGE
    # Both leases were released at exit.
    assert not lease_client.exists(snowflake.LEASE_KEY.format(held_id))
    assert not lease_client.exists(snowflake.LEASE_KEY.format(_worker_id(without_id.stdout)))


def test_a_process_refuses_to_start_without_redis_or_its_mandatory_broker():
    no_redis, no_broker = run_all(
        (python_command(HOLD_LEASE), {"APP_SERVICE": "outreach", "REDIS_URL": f"redis://:hunter2@127.0.0.1:{free_port()}/0"}),
        (python_command(HOLD_LEASE), {"APP_SERVICE": "finance", "KAFKA_BOOTSTRAP_SERVERS": ""}),
    )
    assert no_redis.returncode == 1
    (line,) = no_redis.stderr.strip().splitlines()
    assert line.startswith("merchant-platform: cannot lease a snowflake worker id: Redis at 127.0.0.1:")
    assert "hunter2" not in line
    assert no_broker.returncode == 1
    assert (
        no_broker.stderr.strip()
        == "merchant-platform: finance needs a message broker but KAFKA_BOOTSTRAP_SERVERS is empty; refusing to start"
    )


def test_processes_without_a_configured_id_take_distinct_free_ids(monkeypatch, lease_client):
    monkeypatch.delenv("APP_ENV_NODE_ID", raising=False)
    first, second = snowflake.lease_worker_id(), snowflake.lease_worker_id()
    try:
        assert first.worker_id != second.worker_id
        assert {first.worker_id, second.worker_id} <= set(snowflake.DYNAMIC_RANGE)
        assert lease_client.get(snowflake.LEASE_KEY.format(first.worker_id)).decode() == first.token
        assert lease_client.pttl(snowflake.LEASE_KEY.format(first.worker_id)) > 0
    finally:
        first.release()
        second.release()
    assert not lease_client.exists(snowflake.LEASE_KEY.format(first.worker_id))


def test_a_configured_id_that_is_not_a_number_stops_the_process(monkeypatch):
    monkeypatch.setenv("APP_ENV_NODE_ID", "seven")
    with pytest.raises(SystemExit) as stopped:
        snowflake.configured_worker_id()
    assert stopped.value.code == "merchant-platform: APP_ENV_NODE_ID must be an integer 0..1023, got 'seven'"
    monkeypatch.setenv("APP_ENV_NODE_ID", " 17 ")
    assert snowflake.configured_worker_id() == 17


def test_this_process_holds_a_lease_on_the_id_its_rows_carry(lease_client):
    generator = snowflake.claim()
    holder = lease_client.get(snowflake.LEASE_KEY.format(generator.worker_id))
    assert holder is not None and holder.decode().split(":")[1] == str(os.getpid())
    assert snowflake.parse(Widget(name="unsaved").id)["worker_id"] == generator.worker_id


@pytest.mark.django_db(databases="__all__")
def test_json_carries_ids_as_strings(client, kernel_urls):
    parent = Widget.objects.create(name="parent")
    response = client.post("/kernel-test/widgets", {"name": "child", "parent": str(parent.id)}, content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert isinstance(body["id"], str) and int(body["id"]) > 2**53
    assert body["parent"] == str(parent.id)
    assert body["created_by"] is None

    listed = client.get("/kernel-test/widgets").json()["results"]
    assert [item["id"] for item in listed] == [str(parent.id), body["id"]]
    # An integer id is accepted too; a malformed one is a validation error naming the field.
    assert client.post("/kernel-test/widgets", {"name": "x", "parent": parent.id}, content_type="application/json").status_code == 201
    bad = client.post("/kernel-test/widgets", {"name": "x", "parent": "12ab"}, content_type="application/json")
    assert bad.status_code == 400
    assert [error["field"] for error in bad.json()["errors"]] == ["parent"]


@pytest.mark.parametrize("raw", ["0", "-5", str(2**63), "1.5", "", None, "abc"])
def test_snowflake_field_rejects_what_is_not_an_id(raw):
    from rest_framework.exceptions import ValidationError

    with pytest.raises(ValidationError):
        SnowflakeField().to_internal_value(raw)


def test_a_program_whose_id_variable_serve_set_empty_takes_a_free_id(monkeypatch):
    """serve gives a configured id to its web server and sets the variable empty for its other
    programs: they prefer neither that id nor the service's default (which a sibling replica's web
    server may hold), so none of them races a configured process for it."""
    monkeypatch.setenv("APP_SERVICE", "identity")
    monkeypatch.delenv("APP_ENV_NODE_ID", raising=False)
    assert snowflake._process_worker_preference() == (None, 1, "APP_ENV_NODE_ID")
    monkeypatch.setenv("APP_ENV_NODE_ID", "")
    assert snowflake._process_worker_preference() == (None, None, "APP_ENV_NODE_ID")
    monkeypatch.setenv("APP_ENV_NODE_ID", "1")
    assert snowflake._process_worker_preference() == (1, 1, "APP_ENV_NODE_ID")
