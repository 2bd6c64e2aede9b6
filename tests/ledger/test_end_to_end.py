"""The full path on the real components: POST /ledgers commits the job and its outbox row, the relay
publishes ledger.generate to Kafka, the bridge consumer marks the job PROCESSING and queues the run,
a real Celery worker (another process) fetches finance's lines over HTTP, renders, encrypts and
uploads to SeaweedFS, and the download equals finance's books. A client of signal's /stream
subscribed to the merchant's ledger room decrypts PENDING, PROCESSING and COMPLETED. A worker killed
mid-render: its run is delivered again (late acknowledgement) and completes the job."""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import signal
import threading

import pytest
from django.utils import timezone
from kafka.admin import NewTopic

from apps.ledger import consumers, services
from apps.ledger.models import LedgerJob
from merchant_platform.messaging import topics
from merchant_platform.messaging.registry import ConsumerSpec
from merchant_platform.messaging.runner import ConsumerRunner
from tests.kernel.events.test_celery import start_worker  # noqa: F401 (fixture)
from tests.ledger.conftest import downloaded, make_books
from tests.signal.conftest import stream_client, stream_url  # noqa: F401 (fixture)
from tests.support.broker import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
BASE = "/v1/api/ledger/ledgers"
MERCHANT = 63_001


@pytest.fixture
def caller(make_caller, seeded):
    return make_caller(roles=[("OWNER", MERCHANT)], merchants=[MERCHANT])


@pytest.fixture
def owner(caller):
    return caller.client()


@pytest.fixture
def bridge(kafka_admin):
    """The worker role's bridge consumer in a thread of this process, in a group of its own."""
    topic = str(topics.LEDGER_GENERATE)
    if topic not in set(kafka_admin.list_topics()):
        kafka_admin.create_topics([NewTopic(topic, topics.LEDGER_GENERATE.partitions, 1)])
    spec = ConsumerSpec(
        name=unique("ledger.generate"),
        topics=(topic,),
        handler=consumers.ledger_generate,
        group_id=unique("ledger-test-group"),
        alias="ledger",
        idempotent=False,
        offset_reset="latest",
    )
    stop = threading.Event()
    runner = ConsumerRunner(spec, stop)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    yield runner
    stop.set()
    thread.join(timeout=30)


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as listing:
        return [int(child) for child in listing.read().split()]


def wait_for_partition_assignment(runner) -> None:
    # offset_reset=latest: the group must hold its partitions before the first message is published.
    wait_for(lambda: getattr(runner, "consumer", None) is not None and runner.consumer.assignment(), timeout=30, message="assignment")


@pytest.fixture
def ledger_worker(finance, start_worker, test_database_url, settings):  # noqa: F811
    """A real Celery worker on the `ledger` queue, reading the test database and the fake finance."""

    def start(**env: str):
        return start_worker(
            "ledger", DATABASE_URL=test_database_url, LEDGER_FINANCE_URL=finance.url, LEDGER_BUCKET=settings.LEDGER_BUCKET, **env
        )

    return start


def status_messages(client, count: int) -> list[dict]:
    """The next `count` ledger status messages on the socket: each frame is checked to be
    ciphertext (no payload member in the clear) and decrypted with the connection's key."""
    messages = []
    while len(messages) < count:
        frame = client.receive_raw(timeout=30)
        assert set(json.loads(frame)) == {"seq", "data"} and "ledgerId" not in frame and "status" not in frame
        event = client.channel.open(frame)
        if event["event"] == "message" and event["name"] == services.STATUS_EVENT:
            messages.append(event)
    return messages


def test_enqueue_generate_download_with_live_status_on_signals_stream(finance, caller, bridge, ledger_worker, stream_url):  # noqa: F811
    """A client of signal's /stream (a real uvicorn replica, the encrypted protocol) subscribed to
    the merchant's ledger room decrypts PENDING, PROCESSING and COMPLETED while Kafka, the bridge,
    a real Celery worker and S3 run the job."""
    books = make_books(MERCHANT, vouchers=400, start=datetime.date(2025, 9, 1), days=30)
    finance.books[MERCHANT] = books
    owner = caller.client()
    ledger_worker()
    wait_for_partition_assignment(bridge)
    with stream_client(stream_url, caller.token) as client:
        client.receive()  # `subscribed` to the caller's own room, the first encrypted frame
        assert client.subscribe(services.ledger_room(MERCHANT))["event"] == "subscribed"
        response = owner.post(
            BASE, {"merchantId": str(MERCHANT), "type": "GENERAL_LEDGER", "format": "CSV", "period": "2025-09"}, format="json"
        )
        assert response.status_code == 202
        ledger_id = response.json()["ledgerId"]
        request_id = response["X-Request-Id"]

        messages = status_messages(client, 3)

    assert [m["room"] for m in messages] == [services.ledger_room(MERCHANT)] * 3
    payloads = [m["payload"] for m in messages]
    assert [(p["ledgerId"], p["merchantId"], p["status"]) for p in payloads] == [
        (ledger_id, str(MERCHANT), "PENDING"),
        (ledger_id, str(MERCHANT), "PROCESSING"),
        (ledger_id, str(MERCHANT), "COMPLETED"),
    ]
    assert [p["attemptCount"] for p in payloads] == [0, 1, 1] and payloads[2]["draft"] is False and payloads[2]["errorCode"] is None
    job = owner.get(f"{BASE}/{ledger_id}").json()
    assert job["status"] == "COMPLETED", job
    assert job["attemptCount"] == 1 and job["startedAt"] and job["completedAt"]
    download = owner.get(f"{BASE}/{ledger_id}/download")
    lines = list(csv.reader(io.StringIO(downloaded(download).decode())))
    rows = lines[lines.index([]) + 2 :]
    assert [(r[0], r[1], r[5], int(r[8]), int(r[9])) for r in rows] == [
        (e["date"], e["voucherNumber"], e["accountCode"], e["debit"], e["credit"]) for e in books
    ]
    # The requestId of the POST travelled through Kafka and Celery to finance.
    assert {r["requestId"] for r in finance.requests} == {request_id}


def test_a_worker_killed_mid_render_has_its_run_delivered_again(finance, owner, bridge, ledger_worker):
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=300, start=datetime.date(2025, 8, 1), days=30)
    finance.delay_seconds = 0.5  # every export page takes this long: the render is slow enough to kill
    worker = ledger_worker(LEDGER_FETCH_PAGE_SIZE="20")
    wait_for_partition_assignment(bridge)
    response = owner.post(
        BASE, {"merchantId": str(MERCHANT), "type": "GENERAL_LEDGER", "format": "XLSX", "period": "2025-08"}, format="json"
    )
    ledger_id = int(response.json()["ledgerId"])
    wait_for(lambda: len(finance.requests) >= 2, timeout=60, message="the render under way")
    [pool_pid] = children(worker.popen.pid)  # --concurrency=1: one pool process renders
    os.kill(pool_pid, signal.SIGKILL)
    finance.delay_seconds = 0
    wait_for(lambda: LedgerJob.objects.get(pk=ledger_id).status == "COMPLETED", timeout=90, message="the job completed after the kill")
    assert owner.get(f"{BASE}/{ledger_id}/download").status_code == 200


def test_the_sweep_at_worker_start_recovers_a_job_whose_worker_died(finance, owner, bridge, ledger_worker):
    """A worker died with the job PROCESSING and its run lost: the next worker's start-up sweep
    returns the job to PENDING, publishes it again, and the pipeline completes it (second run)."""
    finance.books[MERCHANT] = make_books(MERCHANT, vouchers=20, start=datetime.date(2025, 6, 1), days=30)
    job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="PDF", period="2025-06")
    assert services.job_start(ledger_id=job.id) is not None  # PROCESSING, and no task queued: the run is lost
    gone = timezone.now() - datetime.timedelta(seconds=30)  # its worker: not heard of since
    LedgerJob.objects.filter(pk=job.id).update(started_at=gone, heartbeat_at=gone)
    wait_for_partition_assignment(bridge)

    ledger_worker(APP_ENV_JOB_TIMEOUT_MS="10000")

    wait_for(lambda: LedgerJob.objects.get(pk=job.id).status == "COMPLETED", timeout=60, message="the swept job completed")
    job.refresh_from_db()
    assert job.attempt_count == 2 and not job.draft
    assert owner.get(f"{BASE}/{job.id}/download")["Content-Type"] == "application/pdf"
