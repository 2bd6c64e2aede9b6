"""Target `events`: event handling throughput through Kafka (Tansu) and the CDC relay, in one run.

(a) raw kafka-python consumption of small JSON messages (no group, no handler): the bare limit;
(b) the consumer runner (`manage.py consume`'s engine) with a no-op handler;
(c) the runner with a handler that makes one idempotent database write (the processed-message
    record and one row, in the runner's transaction); (c') the same as a batch handler
    (`batch=True`: one bulk insert per poll);
(d) the CDC relay: row changes per second from the WAL to acknowledged Kafka records, draining a
    backlog of single-row inserts, and (e) the same with the inserts running at the same time.
(c0) is (c)'s bare limit: the same ORM write in a loop, one transaction, no Kafka.
Targets (issue 3): (c) >= 2,000 messages/s; the CDC relay >= 5,000 row changes/s.

Each figure carries the 1-minute load average (`load1`) when it was taken. Runner figures exclude
the group join (about 3 s on Tansu): the clock runs from the first handled message to the last.
Topics, tables and the replication slot are created for the run and dropped.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

from benchmarks.framework import BenchmarkError, Context, load1

BROKER_MESSAGES = 30_000
IDEMPOTENT_MESSAGES = 20_000
CDC_ROWS = 20_000
MIN_IDEMPOTENT_RATE = 2_000
MIN_CDC_RATE = 5_000
PARTITIONS = 3


def _topic(admin, prefix: str) -> str:
    from kafka.admin import NewTopic

    name = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    return name


def _fill(topic: str, count: int) -> None:
    """Produce the messages, then close the producer: a consumer process without an outbox has none,
    and an idle producer's I/O thread takes the GIL now and then (see docs/performance.md)."""
    from merchant_platform.messaging.producer import close_producer, get_producer

    producer = get_producer()
    for n in range(count):
        producer.send(topic, key=str(n).encode(), value=json.dumps({"n": n, "sku": f"SKU-{n % 97}", "qty": n % 5}).encode())
    producer.flush(timeout=60)
    close_producer()


def bench_raw_consumption(ctx: Context, topic: str, count: int) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    from merchant_platform.messaging.config import client_options

    reader = KafkaConsumer(**client_options("bench"), enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    reader.assign(partitions)
    reader.seek_to_beginning(*partitions)
    seen = 0
    started = time.perf_counter()
    while seen < count:
        for records in reader.poll(timeout_ms=1000, max_records=2000).values():
            for record in records:
                json.loads(record.value)
                seen += 1
        if time.perf_counter() - started > 120:
            raise BenchmarkError(f"raw consumption read {seen} of {count} messages in 120 s")
    elapsed = time.perf_counter() - started
    reader.close()
    return ctx.rate("(a) raw kafka-python consumption", seen, elapsed, unit="msg/s", load1=load1())


class _Clock:
    """first/last handled message times, and a signal when `count` were handled."""

    def __init__(self, count: int):
        self.count = count
        self.handled = 0
        self.first = self.last = 0.0
        self.done = threading.Event()

    def tick(self) -> None:
        self.handled += 1
        now = time.perf_counter()
        if self.handled == 1:
            self.first = now
        if self.handled >= self.count:
            self.last = now
            self.done.set()


def bench_runner(
    ctx: Context, name: str, topic: str, count: int, *, handler_factory, idempotent: bool, processed_model=None, batch=False
) -> dict:
    from merchant_platform.messaging.registry import ConsumerSpec
    from merchant_platform.messaging.runner import ConsumerRunner, tune_interpreter

    tune_interpreter()  # what `manage.py consume` does at start
    clock = _Clock(count)
    spec = ConsumerSpec(
        name=f"bench.{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        handler=handler_factory(clock),
        group_id=f"bench-group-{uuid.uuid4().hex[:8]}",
        alias="default",
        idempotent=idempotent,
        processed_model=processed_model,
        batch=batch,
    )
    stop = threading.Event()
    runner = ConsumerRunner(spec, stop)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    finished = clock.done.wait(timeout=180)
    stop.set()
    thread.join(timeout=30)
    if not finished:
        raise BenchmarkError(f"{name}: handled {clock.handled} of {count} messages in 180 s")
    return ctx.rate(name, count - 1, clock.last - clock.first, unit="msg/s", load1=load1())


def bench_bare_write(ctx: Context, effect_model, count: int) -> dict:
    """The bare limit of (c): the handler's write alone (ORM create), in one transaction, no Kafka."""
    from django.db import transaction

    started = time.perf_counter()
    with transaction.atomic():
        for n in range(count):
            effect_model.objects.create(sku=f"SKU-{n % 97}", quantity=n % 5)
    elapsed = time.perf_counter() - started
    effect_model.objects.all().delete()
    return ctx.rate("(c0) bare: the write of (c) alone, no Kafka", count, elapsed, unit="writes/s", load1=load1())


def _bench_models():
    """Bench-only tables on `default`: the processed-message record and the handler's row."""
    from django.db import models

    from merchant_platform.messaging.models import ProcessedMessageBase

    class BenchProcessedMessage(ProcessedMessageBase):
        class Meta(ProcessedMessageBase.Meta):
            app_label = "merchant_platform"
            db_table = "bench_events_processed"

    class BenchEffect(models.Model):
        sku = models.CharField(max_length=32)
        quantity = models.IntegerField()

        class Meta:
            app_label = "merchant_platform"
            db_table = "bench_events_effect"

        def __str__(self) -> str:
            return f"{self.sku} x{self.quantity}"

    return BenchProcessedMessage, BenchEffect


def _create_tables(*models) -> None:
    from django.db import connection

    with connection.schema_editor() as editor:
        for model in models:
            editor.execute(f"DROP TABLE IF EXISTS {model._meta.db_table} CASCADE")
            editor.create_model(model)


def _drop_tables(*tables: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"DROP TABLE IF EXISTS {table} CASCADE")


def bench_cdc(ctx: Context, admin, rows: int) -> list[dict]:
    from django.db import connection

    from merchant_platform.cdc import Capture
    from merchant_platform.cdc.relay import CdcRelay, connect, drop_slot

    results = []
    table = "bench_events_cdc"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(
            f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2), updated_at timestamptz NOT NULL)"
        )
    for label, concurrent in (
        ("(d) CDC relay, backlog of single-row inserts", False),
        ("(e) CDC relay, inserts running at the same time", True),
    ):
        topic = _topic(admin, "cdc")
        slot = f"bench_cdc_{uuid.uuid4().hex[:8]}"
        relay = CdcRelay(alias="default", slot=slot, captures=[Capture(topic=topic, table=f"public.{table}")], snapshot_mode="never")
        relay.setup()
        offset = 0 if not concurrent else rows
        writer = threading.Thread(target=_insert_rows, args=(table, offset, rows))
        try:
            if concurrent:
                started = time.perf_counter()
                writer.start()
            else:
                inserted_at = time.perf_counter()
                _insert_rows(table, offset, rows)
                ctx.say(f"  (backlog: {rows} single-row insert transactions in {time.perf_counter() - inserted_at:.1f} s)")
                started = time.perf_counter()
            published = 0
            while published < rows:
                published += relay.poll_once()
                if time.perf_counter() - started > 180:
                    raise BenchmarkError(f"CDC relay published {published} of {rows} changes in 180 s")
            elapsed = time.perf_counter() - started
            results.append(ctx.rate(label, published, elapsed, unit="changes/s", load1=load1()))
        finally:
            if writer.is_alive() or writer.ident:
                writer.join()
            relay.close()
            with connect("default") as conn:
                drop_slot(conn, slot)
            admin.delete_topics([topic])
    _drop_tables(table)
    return results


def _insert_rows(table: str, start: int, count: int) -> None:
    """Single-row transactions: one commit record per row change, the relay's worst case. Sent 200
    transactions per round trip, with synchronous_commit=off so that the writer is not bound by the
    disk's flush rate (the WAL the relay reads is the same)."""
    import psycopg

    from merchant_platform.cdc.relay import connection_params

    with psycopg.connect(**connection_params("default"), autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        for first in range(start, start + count, 200):
            statements = [
                f"BEGIN; INSERT INTO {table} VALUES ({n}, 'item {n}', {n % 1000}, now()); COMMIT;"  # noqa: S608  (our own integers)
                for n in range(first, min(first + 200, start + count))
            ]
            conn.execute("".join(statements).encode())


def run(ctx: Context) -> list[dict]:
    ctx.django()
    from django.db import connections
    from kafka import KafkaAdminClient

    from merchant_platform.messaging.config import client_options
    from merchant_platform.messaging.producer import close_producer

    admin = KafkaAdminClient(**client_options("bench-admin"))
    processed_model, effect_model = _bench_models()
    _create_tables(processed_model, effect_model)
    results = []
    topics = []
    try:
        topic = _topic(admin, "small-json")
        topics.append(topic)
        _fill(topic, BROKER_MESSAGES)
        ctx.say(f"  produced {BROKER_MESSAGES} small JSON messages on {topic} ({PARTITIONS} partitions)")
        results.append(bench_raw_consumption(ctx, topic, BROKER_MESSAGES))

        def noop(clock):
            return lambda message: clock.tick()

        results.append(
            bench_runner(ctx, "(b) consumer runner, no-op handler", topic, BROKER_MESSAGES, handler_factory=noop, idempotent=False)
        )

        def write_one_row(clock):
            def handle(message):
                body = message.value
                effect_model.objects.create(sku=body["sku"], quantity=body["qty"])
                clock.tick()

            return handle

        results.append(bench_bare_write(ctx, effect_model, IDEMPOTENT_MESSAGES // 4))
        idempotent_topic = _topic(admin, "idempotent")
        topics.append(idempotent_topic)
        _fill(idempotent_topic, IDEMPOTENT_MESSAGES)
        idempotent = bench_runner(
            ctx,
            "(c) consumer runner, idempotent write",
            idempotent_topic,
            IDEMPOTENT_MESSAGES,
            handler_factory=write_one_row,
            idempotent=True,
            processed_model=processed_model,
        )
        results.append(idempotent)
        written = effect_model.objects.count()
        if written != IDEMPOTENT_MESSAGES:
            raise BenchmarkError(f"(c) wrote {written} rows for {IDEMPOTENT_MESSAGES} messages")

        def write_rows_in_bulk(clock):
            def handle(messages):
                effect_model.objects.bulk_create([effect_model(sku=m.value["sku"], quantity=m.value["qty"]) for m in messages])
                for _ in messages:
                    clock.tick()

            return handle

        results.append(
            bench_runner(
                ctx,
                "(c') runner, idempotent write, batch handler",
                idempotent_topic,
                IDEMPOTENT_MESSAGES,
                handler_factory=write_rows_in_bulk,
                idempotent=True,
                processed_model=processed_model,
                batch=True,
            )
        )
        cdc = bench_cdc(ctx, admin, CDC_ROWS)
        results += cdc
    finally:
        close_producer()
        _drop_tables(processed_model._meta.db_table, effect_model._meta.db_table)
        if topics:
            admin.delete_topics(topics)
        admin.close()
        connections.close_all()
    results.append(
        ctx.record("check: (c) >= 2,000 msg/s", value=round(idempotent["rate"]), passed=idempotent["rate"] >= MIN_IDEMPOTENT_RATE)
    )
    relay_rate = cdc[0]["rate"]
    results.append(ctx.record("check: CDC relay (d) >= 5,000 changes/s", value=round(relay_rate), passed=relay_rate >= MIN_CDC_RATE))
    return results
