"""Celery on real workers (Redis broker): a task runs with the caller's requestId, beat runs a
periodic task, a task whose worker is killed mid-task runs again (late acknowledgement), and a pool
process that stops still publishes the room sends its tasks left queued and gives back its worker id."""

import json
import os
import signal
import sys

import pytest
import redis
from django.conf import settings

from merchant_platform import snowflake
from merchant_platform.celery import app
from merchant_platform.context import bind_request_id, reset_request_id
from merchant_platform.realtime import group_name
from tests.support.broker import read_topic, unique
from tests.support.processes import PROCESS_SPECIFIC, Process
from tests.support.waiting import patience, wait_for


@pytest.fixture
def client():
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def start_worker(tmp_path):
    started: list[Process] = []

    def start(queue: str, *extra: str, **env: str) -> Process:
        base = {k: v for k, v in os.environ.items() if k not in PROCESS_SPECIFIC}
        base.update(
            DJANGO_SETTINGS_MODULE="tests.kernel.events.celery_settings",
            CELERY_BEAT_SCHEDULE_FILENAME=str(tmp_path / "beat-schedule"),
            **env,
        )
        command = ["-m", "celery", "-A", "merchant_platform", "worker", "-Q", queue, "--concurrency=1", "--pool=prefork"]
        command += ["--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO", *extra]
        process = Process([sys.executable, *command], base, tmp_path / f"worker-{len(started)}.log")
        started.append(process)
        wait_for(lambda: "ready." in process.output or process.popen.poll() is not None, timeout=60, message="worker ready")
        assert process.popen.poll() is None, process.output
        return process

    yield start
    for process in started:
        process.stop()


def test_worker_runs_a_task_with_the_request_id_and_beat_runs_periodic_ones(start_worker, client):
    queue, key, beat_key = unique("events-test-queue"), unique("celery-record"), unique("celery-beat")
    start_worker(queue, "--beat", EVENTS_TEST_BEAT_KEY=beat_key, EVENTS_TEST_QUEUE=queue)
    token = bind_request_id("req-celery-1")
    try:
        result = app.send_task("events_test.record", args=[key], queue=queue)
    finally:
        reset_request_id(token)
    assert result.get(timeout=30) == "ok"
    [entry] = [json.loads(item) for item in client.lrange(key, 0, -1)]
    assert entry["requestId"] == "req-celery-1"
    wait_for(lambda: client.llen(beat_key) >= 2, timeout=30, message="two periodic runs")


def test_task_of_a_killed_pool_process_runs_again(start_worker, client):
    queue, key = unique("events-test-queue"), unique("celery-slow")
    worker = start_worker(queue)
    app.send_task("events_test.slow", args=[key, 120], queue=queue)
    wait_for(lambda: client.get(f"{key}:starts") == b"1", timeout=30, message="the task started")
    os.kill(int(client.lindex(f"{key}:pids", 0)), signal.SIGKILL)
    wait_for(lambda: client.get(f"{key}:finished") == b"1", timeout=30, message="the task ran again")
    assert client.get(f"{key}:starts") == b"2"
    assert worker.popen.poll() is None


def test_task_of_a_killed_worker_runs_on_another_worker(start_worker, client):
    queue, key = unique("events-test-queue"), unique("celery-slow")
    first = start_worker(queue)
    app.send_task("events_test.slow", args=[key, 120], queue=queue)
    wait_for(lambda: client.get(f"{key}:starts") == b"1", timeout=30, message="the task started")
    first.signal(signal.SIGKILL, group=True)  # the whole worker dies: nothing acknowledges the task
    first.wait(timeout=10)
    start_worker(queue)
    wait_for(lambda: client.get(f"{key}:finished") == b"1", timeout=40, message="the task ran on the second worker")
    assert client.get(f"{key}:starts") == b"2"


def leases_of(client, pid: int) -> list[bytes]:
    """The snowflake lease keys whose holder is process `pid` (holder: "<host>:<pid>:<token>")."""
    return [
        key for key in client.scan_iter(snowflake.LEASE_KEY.format("*")) if (client.get(key) or b"").split(b":")[1:2] == [str(pid).encode()]
    ]


@pytest.mark.django_db(transaction=True)  # the task's send checks the commit state of `default`
def test_a_stopping_pool_process_publishes_its_room_sends_and_gives_back_its_worker_id(start_worker, client, test_database_url):
    queue, room = unique("events-test-queue"), unique("room")
    # The publisher would wait a minute: only the flush at the pool process's exit can send in time.
    worker = start_worker(queue, DATABASE_URL=test_database_url, REALTIME_PUBLISH_INTERVAL_SECONDS="60")
    pubsub = client.pubsub()
    pubsub.psubscribe(f"*__group__{group_name(room)}")
    assert pubsub.get_message(timeout=5)["type"] == "psubscribe"
    pool_pid = app.send_task("events_test.announce", args=[room], queue=queue).get(timeout=30)
    (lease,) = leases_of(client, pool_pid)
    worker.signal(signal.SIGTERM)  # to the main process only: a warm shutdown stops the pool process,
    worker.wait(timeout=30)  # which leaves through os._exit
    message = wait_for(lambda: pubsub.get_message(timeout=0.5), timeout=20, message="the room send")
    pubsub.close()
    assert message["type"] == "pmessage"
    assert not client.exists(lease)  # released at exit, not left to lapse after the lease's TTL


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_pool_process_relays_each_tasks_events_at_its_commit(start_worker, make_topic, test_database_url):
    """Celery's Django fixup closes the database pools before and after every task in a prefork
    process; the relay after a task's commit once raced it and lost ("pool has already been
    opened/closed"). No relay loop runs here: an event the commit's relay missed would never leave."""
    queue, topic = unique("events-test-queue"), make_topic()
    worker = start_worker(queue, DATABASE_URL=test_database_url, DB_POOL="true")
    references = [f"R-{n}" for n in range(20)]
    sent = [app.send_task("events_test.publish", args=[topic, reference], queue=queue) for reference in references]
    assert [result.get(timeout=patience(30)) for result in sent] == references
    records = read_topic(topic, expected=len(references))
    assert sorted(json.loads(record.value)["reference"] for record in records) == sorted(references)
    assert "outbox.relay_deferred" not in worker.output
