"""The consumer runner on the real broker: at-least-once with offsets committed after the
handler's transaction, idempotent effects, bounded retries, dead letters, SIGTERM."""

import dataclasses
import json
import logging
import signal
import threading

import pytest
import redis
from django.conf import settings
from django.db import connection

from merchant_platform.messaging.config import MAX_RECORD_BYTES
from merchant_platform.messaging.registry import ConsumerSpec
from merchant_platform.messaging.runner import GroupRunner, run_consumers, runners_for
from tests.kernel.events.testapp.models import Effect, ProcessedMessage
from tests.support.broker import committed_offsets, produce, read_topic, unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def make_spec(topic: str, handler, **options) -> ConsumerSpec:
    defaults = {"max_retries": 2, "retry_backoff_seconds": 0.05}
    return ConsumerSpec(
        name=unique("events-test.consumer"),
        topics=(topic,),
        handler=handler,
        group_id=unique("events-test-group"),
        alias="default",
        processed_model=ProcessedMessage,
        **{**defaults, **options},
    )


def effects(run: str) -> list[str]:
    return sorted(Effect.objects.filter(run=run).values_list("value", flat=True), key=int)


def test_produce_consume_commit(make_topic, raw_producer, run_consumer):
    topic, run = make_topic(), unique("run")
    produce(raw_producer, topic, [{"n": n} for n in range(20)], key=lambda v: v["n"])
    consumer = run_consumer(make_spec(topic, lambda m: Effect.objects.create(run=run, value=str(m.value["n"]))))
    wait_for(lambda: Effect.objects.filter(run=run).count() == 20, message="20 effects")
    consumer.finish()
    assert effects(run) == [str(n) for n in range(20)]
    assert sum(offset or 0 for offset in committed_offsets(consumer.spec.group_id, topic).values()) == 20
    assert ProcessedMessage.objects.filter(consumer=consumer.spec.name).count() == 20


def test_handler_crashing_midway_gets_the_message_again_and_its_effect_happens_once(make_topic, raw_producer, run_consumer):
    topic, run = make_topic(partitions=1), unique("run")
    attempts: dict[int, int] = {}

    def handler(message):
        n = message.value["n"]
        Effect.objects.create(run=run, value=str(n))  # the effect is written, then the handler dies
        attempts[n] = attempts.get(n, 0) + 1
        if n == 3 and attempts[n] < 3:
            raise ConnectionResetError("downstream hung up")

    produce(raw_producer, topic, [{"n": n} for n in range(6)])
    consumer = run_consumer(make_spec(topic, handler))
    wait_for(lambda: Effect.objects.filter(run=run).count() == 6, message="6 effects")
    consumer.finish()
    assert effects(run) == ["0", "1", "2", "3", "4", "5"]
    assert attempts[3] == 3
    assert committed_offsets(consumer.spec.group_id, topic) == {0: 6}


def test_poison_messages_are_parked_and_later_messages_flow(make_topic, raw_producer, run_consumer):
    topic, run = make_topic(partitions=1), unique("run")

    def handler(message):
        if message.value.get("poison"):
            raise ValueError("cannot apply this order")
        Effect.objects.create(run=run, value=str(message.value["n"]))

    produce(raw_producer, topic, [{"n": 0}], headers={"requestId": "req-0"})
    produce(raw_producer, topic, [b"{not json", {"n": 1, "poison": True}, {"n": 2}, {"n": 3}])
    consumer = run_consumer(make_spec(topic, handler))
    wait_for(lambda: Effect.objects.filter(run=run).count() == 3, message="the good messages")
    parked = read_topic(f"{topic}.DLQ", expected=2)
    consumer.finish()
    assert effects(run) == ["0", "2", "3"]
    assert [record.value for record in parked] == [b"{not json", json.dumps({"n": 1, "poison": True}).encode()]
    undecodable, poison = ({name: value.decode() for name, value in record.headers} for record in parked)
    assert undecodable["dlq.attempts"] == "1"  # not JSON: no retry can fix it
    assert undecodable["dlq.errorClass"].endswith("UndecodableMessage")
    assert poison["dlq.error"] == "ValueError: cannot apply this order"
    assert poison["dlq.attempts"] == "3"  # the first try and max_retries=2
    assert (poison["dlq.topic"], poison["dlq.partition"], poison["dlq.offset"]) == (topic, "0", "2")
    assert poison["dlq.consumer"] == consumer.spec.name and poison["dlq.group"] == consumer.spec.group_id
    assert committed_offsets(consumer.spec.group_id, topic) == {0: 5}


def test_batch_handler_gets_new_messages_once_and_a_failure_is_isolated(make_topic, raw_producer, run_consumer):
    topic, run = make_topic(partitions=1), unique("run")
    calls: list[list[int]] = []

    def handler(messages):
        numbers = [m.value["n"] for m in messages]
        calls.append(numbers)
        if 4 in numbers:
            raise ValueError("4 is poison")
        Effect.objects.bulk_create([Effect(run=run, value=str(n)) for n in numbers])

    produce(raw_producer, topic, [{"n": n} for n in range(8)])
    produce(raw_producer, topic, [{"n": 2}], headers={"messageId": "dup"})
    produce(raw_producer, topic, [{"n": 2}], headers={"messageId": "dup"})
    consumer = run_consumer(make_spec(topic, handler, batch=True))
    wait_for(lambda: committed_offsets(consumer.spec.group_id, topic) == {0: 10}, message="all offsets committed")
    consumer.finish()
    assert effects(run) == ["0", "1", "2", "2", "3", "5", "6", "7"]  # 4 parked; the duplicate "dup" applied once
    assert [json.loads(r.value)["n"] for r in read_topic(f"{topic}.DLQ", expected=1)] == [4]
    # After the failed batch, the poison one is tried alone three times (the first try and max_retries=2).
    assert [call for call in calls[1:] if 4 in call and len(call) == 1] == [[4], [4], [4]]


def test_each_committed_transaction_logs_the_request_ids_of_its_messages(make_topic, raw_producer, run_consumer, caplog):
    """A batch handler runs with no request bound; the consumer.handled line names the requests."""
    caplog.set_level(logging.INFO, logger="merchant_platform.messaging.runner")
    topic, run = make_topic(partitions=1), unique("run")
    produce(raw_producer, topic, [{"n": 0}, {"n": 1}], headers={"requestId": "req-a"})
    produce(raw_producer, topic, [{"n": 2}], headers={"requestId": "req-b"})
    produce(raw_producer, topic, [{"n": 3}], headers={"requestId": "not a sane id"})
    consumer = run_consumer(
        make_spec(topic, lambda ms: Effect.objects.bulk_create([Effect(run=run, value=str(m.value["n"])) for m in ms]), batch=True)
    )
    wait_for(lambda: committed_offsets(consumer.spec.group_id, topic) == {0: 4}, message="all offsets committed")
    consumer.finish()
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "consumer.handled"]
    lines = [line for line in lines if line["consumer"] == consumer.spec.name]
    assert sum(line["messages"] for line in lines) == 4
    assert [rid for line in lines for rid in line["requestIds"].split(",") if rid] == ["req-a", "req-b"]


def test_redelivered_and_republished_messages_do_nothing(make_topic, raw_producer, run_consumer):
    topic, run = make_topic(), unique("run")
    values = [{"n": n} for n in range(5)]
    produce(raw_producer, topic, values[:3])
    # An outbox relay that crashed after the broker's acknowledgement publishes a row twice.
    for value in values:
        produce(raw_producer, topic, [value], headers={"messageId": f"{run}-{value['n']}"})
    first = make_spec(topic, lambda m: Effect.objects.create(run=run, value=str(m.value["n"])))
    consumer = run_consumer(first)
    wait_for(lambda: ProcessedMessage.objects.filter(consumer=first.name).count() == 8, message="8 messages")
    consumer.finish()
    # The same consumer in a fresh group gets everything again (a lost offset commit).
    again = run_consumer(ConsumerSpec(**{**first.__dict__, "group_id": unique("events-test-group")}))
    wait_for(lambda: sum(o or 0 for o in committed_offsets(again.spec.group_id, topic).values()) == 8, message="redelivery done")
    again.finish()
    assert effects(run) == ["0", "0", "1", "1", "2", "2", "3", "4"]  # 3 without messageId + 5 with


@pytest.fixture
def subprocess_consumer(spawn, subprocess_env, make_topic):
    topic, group, run = make_topic(partitions=1), unique("events-test-group"), unique("run")

    def start():
        env = subprocess_env(EVENTS_TEST_TOPIC=topic, EVENTS_TEST_GROUP=group, EVENTS_TEST_RUN=run)
        return spawn("manage.py", "consume", "--consumer", "events-test.subprocess", "--no-relay", env=env, name="consume")

    return topic, group, run, start


def test_killed_after_the_database_commit_the_message_comes_back_and_is_skipped(subprocess_consumer, raw_producer):
    topic, group, run, start = subprocess_consumer
    produce(raw_producer, topic, [{"n": 0}, {"n": 1, "die_after_commit": True}])
    first = start()
    assert first.wait(timeout=60) == 137, first.output
    assert effects(run) == ["0", "1"]
    produce(raw_producer, topic, [{"n": 2}])
    start()
    wait_for(lambda: committed_offsets(group, topic) == {0: 3}, timeout=60, message="offsets committed after the restart")
    assert effects(run) == ["0", "1", "2"]


def test_sigterm_finishes_the_message_in_hand_commits_and_exits(subprocess_consumer, raw_producer):
    topic, group, run, start = subprocess_consumer
    produce(raw_producer, topic, [{"n": n, "sleep": 1.5} for n in range(4)])
    process = start()
    client = redis.Redis.from_url(settings.REDIS_URL)
    wait_for(lambda: client.llen(f"{run}:started") >= 1, timeout=60, message="a message in hand")
    process.signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, process.output
    handled = effects(run)
    assert handled == ["0"], process.output
    assert committed_offsets(group, topic) == {0: 1}
    assert "consumer.stopped" in process.output


def test_the_consumers_of_one_group_share_one_member_and_each_gets_its_topic(make_topic, raw_producer):
    # Three consumers of one group on three topics (a service's consumers share its group): every
    # one gets its messages, committed in the group. With a Kafka member per consumer, Tansu
    # assigned only the group leader's topic and the other consumers never received anything.
    group, run = unique("events-test-group"), unique("run")
    topics = [make_topic() for _ in range(3)]
    specs = [
        dataclasses.replace(
            make_spec(topic, lambda m, t=topic: Effect.objects.create(run=run, value=f"{t}:{m.value['n']}")), group_id=group
        )
        for topic in topics
    ]
    runners = runners_for(specs, threading.Event())
    assert len(runners) == 1 and isinstance(runners[0], GroupRunner)
    for topic in topics:
        produce(raw_producer, topic, [{"n": n} for n in range(5)], key=lambda v: v["n"])
    stop = threading.Event()
    thread = threading.Thread(target=run_consumers, args=(specs, stop), daemon=True)
    thread.start()
    try:
        wait_for(lambda: Effect.objects.filter(run=run).count() == 15, message="15 effects over three topics")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert sorted(Effect.objects.filter(run=run).values_list("value", flat=True)) == sorted(f"{t}:{n}" for t in topics for n in range(5))
    for topic in topics:
        assert sum(offset or 0 for offset in committed_offsets(group, topic).values()) == 5


def test_a_message_that_cannot_be_identified_is_parked_and_the_consumer_goes_on(make_topic, raw_producer, run_consumer):
    # No messageId header and an `op` that is a list: identifying it as a change event used to raise
    # outside the handler's error handling, and the runner reconnected onto the same offset forever.
    topic, run = make_topic(partitions=1), unique("run")
    produce(raw_producer, topic, [{"op": ["c"], "source": {"lsn": 1}}, {"n": 1}])
    consumer = run_consumer(make_spec(topic, lambda m: Effect.objects.create(run=run, value=str(m.value["n"]))))
    [parked] = read_topic(f"{topic}.DLQ", expected=1)
    wait_for(lambda: committed_offsets(consumer.spec.group_id, topic) == {0: 2}, message="both offsets committed")
    consumer.finish()
    assert effects(run) == ["1"]
    headers = {name: value.decode() for name, value in parked.headers}
    assert headers["dlq.errorClass"].endswith("UndecodableMessage")
    assert "cannot identify" in headers["dlq.error"]
    assert headers["dlq.attempts"] == "1"


@pytest.mark.parametrize(
    "sqlstate",
    ["40P01", "40001", "55P03", "57014", "54000"],
    ids=["deadlock", "serialization", "lock-timeout", "statement-timeout", "row-too-large"],
)
def test_a_database_error_of_the_handler_is_a_handler_failure_not_a_database_outage(make_topic, raw_producer, run_consumer, sqlstate):
    # PostgreSQL raises the error class itself (RAISE ... USING ERRCODE): psycopg maps each of these
    # to an OperationalError, which the runner took for "database down" and rewound forever.
    topic, run = make_topic(partitions=1), unique("run")

    def handler(message):
        if message.value.get("fail"):
            with connection.cursor() as cursor:
                cursor.execute(f"DO $$ BEGIN RAISE EXCEPTION 'handler failed' USING ERRCODE = '{sqlstate}'; END $$")
        Effect.objects.create(run=run, value=str(message.value["n"]))

    produce(raw_producer, topic, [{"n": 0}, {"n": 1, "fail": True}, {"n": 2}])
    consumer = run_consumer(make_spec(topic, handler))
    [parked] = read_topic(f"{topic}.DLQ", expected=1)
    wait_for(lambda: committed_offsets(consumer.spec.group_id, topic) == {0: 3}, message="every offset committed")
    consumer.finish()
    assert effects(run) == ["0", "2"]
    headers = {name: value.decode() for name, value in parked.headers}
    assert headers["dlq.attempts"] == "3" and headers["dlq.offset"] == "1"
    assert headers["dlq.errorClass"] == "django.db.utils.OperationalError"


def test_poison_messages_among_many_neither_stall_the_group_nor_get_parked_twice(make_topic, raw_producer, run_consumer):
    # Retrying a failing message used to sleep inside the poll (0.5 + 1 s here per message): a few in
    # one poll outlasted max_poll_interval_ms, the consumer left its group, its offset commit failed,
    # and after rejoining it redid the poll and parked again what it had parked.
    topic, run = make_topic(partitions=3), unique("run")
    poison = set(range(25, 1020, 50))
    values = [{"n": n, "poison": n in poison} for n in range(1020)]

    def handler(message):
        if message.value["poison"]:
            raise ValueError("cannot apply this order")
        Effect.objects.create(run=run, value=str(message.value["n"]))

    for start in range(0, len(values), 100):
        for value in values[start : start + 100]:
            raw_producer.send(topic, value=json.dumps(value).encode(), key=str(value["n"]).encode())
        raw_producer.flush()
    consumer = run_consumer(make_spec(topic, handler, max_retries=2, retry_backoff_seconds=0.5))
    wait_for(
        lambda: sum(o or 0 for o in committed_offsets(consumer.spec.group_id, topic).values()) == 1020, timeout=60, message="all offsets"
    )
    consumer.finish()
    assert effects(run) == [str(n) for n in range(1020) if n not in poison]  # every good one, once
    parked = read_topic(f"{topic}.DLQ", expected=None)
    assert sorted(json.loads(record.value)["n"] for record in parked) == sorted(poison)  # each poison one, once
    assert {dict(record.headers)["dlq.attempts"] for record in parked} == {b"3"}
    assert consumer.runner.assignments == 1  # joined once, never rebalanced


def test_a_parked_message_delivered_again_is_not_parked_again(make_topic, raw_producer, run_consumer):
    topic, run = make_topic(partitions=1), unique("run")

    def handler(message):
        if message.value.get("poison"):
            raise ValueError("cannot apply this order")
        Effect.objects.create(run=run, value=str(message.value["n"]))

    produce(raw_producer, topic, [{"n": 0, "poison": True}, b"{not json", {"n": 1}])
    first = make_spec(topic, handler)
    consumer = run_consumer(first)
    wait_for(lambda: committed_offsets(first.group_id, topic) == {0: 3}, message="offsets committed")
    consumer.finish()
    # The same consumer in a fresh group gets everything again (a rebalance after a lost offset commit).
    again = run_consumer(dataclasses.replace(first, group_id=unique("events-test-group")))
    wait_for(lambda: committed_offsets(again.spec.group_id, topic) == {0: 3}, message="redelivery done")
    again.finish()
    assert len(read_topic(f"{topic}.DLQ", expected=None)) == 2
    assert effects(run) == ["1"]


def test_a_message_too_large_to_park_with_its_headers_is_parked_without_its_value(make_topic, raw_producer, run_consumer):
    # A record just under the limit is over it once the dlq.* headers are added: the dead letter used
    # to be refused and retried forever, holding the partition.
    topic, run = make_topic(partitions=1), unique("run")
    produce(raw_producer, topic, [b"x" * (MAX_RECORD_BYTES - 200), {"n": 1}])
    consumer = run_consumer(make_spec(topic, lambda m: Effect.objects.create(run=run, value=str(m.value["n"]))))
    [parked] = read_topic(f"{topic}.DLQ", expected=1)
    wait_for(lambda: committed_offsets(consumer.spec.group_id, topic) == {0: 2}, message="both offsets committed")
    consumer.finish()
    headers = {name: value.decode() for name, value in parked.headers}
    assert parked.value == b"" and headers["dlq.valueOmitted"].startswith(f"{MAX_RECORD_BYTES - 200} bytes")
    assert (headers["dlq.offset"], headers["dlq.errorClass"].rsplit(".", 1)[-1]) == ("0", "UndecodableMessage")
    assert effects(run) == ["1"]
