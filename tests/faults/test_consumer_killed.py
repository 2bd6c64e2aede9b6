"""Consumers killed with SIGKILL mid-batch (issue 21, item 2): signal's activity notifications,
taxation's product stream and ledger's bridge each run as a process of their own
(tests/kernel/events/consume.py) on a test topic, in polls of POLL records. The first process dies inside a
poll's transaction (its work rolled back), the second right after a poll's database commit and before
its offset commit (the whole poll comes again), the third finishes the topic. Every message is
handled exactly once in effect: nothing lost, nothing applied twice. Inventory's and finance's
consumers are killed the same way in tests/inventory/test_redelivery.py and
tests/finance/test_consumers.py."""

from __future__ import annotations

import base64
import json
import signal
from decimal import Decimal

import pytest
import redis
from django.db.models import Count

from apps.ledger import services as ledger
from apps.ledger.models import LedgerJob
from apps.signal.consumers import ACTIVITY_CONSUMER
from apps.signal.models import Notification
from apps.signal.models import ProcessedMessage as SignalProcessed
from apps.taxation import consumers as taxation_consumers
from apps.taxation import services as taxation
from apps.taxation.models import TaxSet
from tests.support.broker import committed_offsets, produce, unique
from tests.support.waiting import wait_for
from tests.taxation.test_product_stream import change

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]
POLL = 20  # records per poll: several polls, so a kill lands with some committed and some not
KILLS = (("handler", 50), ("commit", 30))  # the first dies mid-poll 3; the second after committing its poll 2


def consume_through_kills(spawn, subprocess_env, consumer: str, topic: str, total: int, **env: str) -> None:
    """Run `consumer` on `topic` (one partition, `total` messages) in a new group: killed as KILLS
    says, then started again until every offset is committed."""
    group = unique("fault-kill")
    command = ("-m", "tests.kernel.events.consume", consumer, topic, group)
    for when, count in KILLS:
        dying = spawn(
            *command,
            env=subprocess_env(KAFKA_CONSUMER_MAX_POLL_RECORDS=str(POLL), CONSUME_KILL_AT=str(count), CONSUME_KILL_WHEN=when, **env),
            name=f"killed-{when}",
        )
        assert dying.wait(timeout=90) == -signal.SIGKILL, dying.output
    assert (committed_offsets(group, topic).get(0) or 0) < total, "the kills came after the end: nothing was tested"
    spawn(*command, env=subprocess_env(**env), name="restarted")
    wait_for(lambda: committed_offsets(group, topic) == {0: total}, timeout=120, message="every offset committed")


def test_signal_stores_each_notification_once(make_topic, raw_producer, spawn, subprocess_env):
    topic, recipient, total = make_topic("signal-kill", partitions=1), 7_700_000_000 + 1, 120
    values = [{"recipientId": str(recipient), "topic": "fault.kill", "data": {"n": n}} for n in range(total)]
    for n, value in enumerate(values):
        produce(raw_producer, topic, [value], headers={"messageId": f"{topic}-{n}"})
    consume_through_kills(spawn, subprocess_env, ACTIVITY_CONSUMER, topic, total)
    stored = sorted(Notification.objects.filter(recipient_id=recipient).values_list("data__n", flat=True))
    assert stored == list(range(total))
    assert SignalProcessed.objects.filter(message_id__startswith=topic).count() == total


def test_taxation_applies_each_product_change_once(make_topic, raw_producer, spawn, subprocess_env):
    """Each product is created with group A, then moved to group B: applied once each, a product
    has one DEACTIVATED set (A) and one ACTIVE (B). Applied twice, the replayed `c` would deactivate
    B and provision A again, and the replayed `u` B once more: four sets."""
    topic, merchant, products = make_topic("taxation-kill", partitions=1), 5_100_000_001, range(9_100_001, 9_100_061)
    first, second = (
        taxation.tax_group_create(merchant_id=merchant, name=name, items=[{"name": "VAT", "rate": Decimal(rate)}])
        for name, rate in (("A", "10"), ("B", "20"))
    )
    events = [change("c", product, tax_group_id=first.id, merchant_id=merchant) for product in products]
    events += [change("u", product, tax_group_id=second.id, merchant_id=merchant) for product in products]
    produce(raw_producer, topic, events, key=lambda event: event["after"]["id"])
    consume_through_kills(spawn, subprocess_env, taxation_consumers.CONSUMER, topic, len(events))
    sets = TaxSet.objects.filter(product_id__in=products)
    assert set(sets.values_list("product_id", "group_id", "status")) == {
        (product, group.id, status) for product in products for group, status in ((first, "DEACTIVATED"), (second, "ACTIVE"))
    }
    assert {row["n"] for row in sets.values("product_id").annotate(n=Count("id"))} == {2}


def queued_runs(broker: redis.Redis) -> list[tuple[int, str]]:
    """The (ledgerId, runId) of every generate_ledger run waiting on the `ledger` Celery queue."""
    runs = []
    for raw in broker.lrange("ledger", 0, -1):
        args, _kwargs, _embed = json.loads(base64.b64decode(json.loads(raw)["body"]))
        runs.append(tuple(args))
    return runs


def test_the_ledger_bridge_starts_each_job_once_and_queues_one_run(make_topic, raw_producer, spawn, subprocess_env, private_redis):
    """The bridge marks a job PROCESSING and queues its run (the Celery broker is this test's own
    Redis, so its `ledger` queue holds exactly what the bridge queued; no worker takes them)."""
    topic = make_topic("ledger-kill", partitions=1)
    jobs = [ledger.job_create(merchant_id=6_400_001 + n, type="GENERAL_LEDGER", format="CSV", period="2025-01") for n in range(90)]
    produce(raw_producer, topic, [{"ledgerId": str(job.id)} for job in jobs])
    consume_through_kills(spawn, subprocess_env, "ledger.generate", topic, len(jobs), CELERY_BROKER_URL=private_redis.url)
    started = LedgerJob.objects.filter(pk__in=[job.id for job in jobs])
    assert set(started.values_list("status", "attempt_count")) == {("PROCESSING", 1)}
    runs = queued_runs(redis.Redis.from_url(private_redis.url))
    assert sorted(runs) == sorted((job.id, str(job.run_id)) for job in started)
