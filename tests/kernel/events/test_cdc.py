"""The CDC relay on the real PostgreSQL WAL: Debezium envelopes for inserts, updates and deletes,
the snapshot, and no change lost when the relay dies between publishing and acknowledging."""

import base64
import datetime as dt
import signal
import threading
from decimal import Decimal

import pytest
from django.db import connection

from merchant_platform.cdc import Capture, as_datetime, parse_change_event, parse_change_key
from merchant_platform.cdc.relay import CdcRelay, connect, slot_lag
from merchant_platform.messaging.registry import ConsumerSpec
from merchant_platform.messaging.runner import ConsumerRunner
from tests.kernel.events.testapp.models import CdcItem, Effect, ProcessedMessage
from tests.support.broker import read_topic, unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
TABLE = "public.events_testapp_cdcitem"


def relay_for(slot: str, topic: str, **options) -> CdcRelay:
    return CdcRelay(alias="default", slot=slot, captures=[Capture(topic=topic, table=TABLE)], **{"snapshot_mode": "never", **options})


def poll_until(relay: CdcRelay, count: int) -> None:
    published = 0
    for _ in range(50):
        published += relay.poll_once()
        if published >= count:
            return
    raise AssertionError(f"relay published {published} changes, expected {count}")


def events(records) -> list[tuple]:
    return [(parse_change_key(r.key), parse_change_event(r.value)) for r in records]


def test_insert_update_delete_arrive_as_debezium_envelopes(make_topic, slot):
    topic = make_topic()
    relay = relay_for(slot, topic)
    relay.setup()
    moment = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)
    item = CdcItem.objects.create(
        id=2**62 + 7, name="Lamp", price=Decimal("12.50"), happened_at=moment, day=dt.date(2024, 5, 6), blob=b"\x01\x02", data={"k": [1, 2]}
    )
    CdcItem.objects.filter(pk=item.pk).update(name="Desk lamp", active=False)
    CdcItem.objects.filter(pk=item.pk).delete()
    poll_until(relay, 3)
    relay.close()
    records = read_topic(topic, expected=4)
    assert [r.value is None for r in records] == [False, False, False, True]  # a tombstone follows the delete
    (key, created), (_, updated), (_, deleted), (_, tombstone) = events(records)
    assert key == {"id": 2**62 + 7} and all(r.key == records[0].key for r in records)
    assert tombstone is None
    assert [created.op, updated.op, deleted.op] == ["c", "u", "d"]
    assert created.before is None
    assert created.after == {
        "id": 2**62 + 7,
        "name": "Lamp",
        "price": "12.50",
        "active": True,
        "happened_at": "2024-05-06T07:08:09.123456Z",
        "day": 19849,
        "blob": base64.b64encode(b"\x01\x02").decode(),
        "data": '{"k": [1, 2]}',
    }
    assert as_datetime(created.after["happened_at"]) == moment
    assert updated.before == created.after
    assert updated.after == {**created.after, "name": "Desk lamp", "active": False}
    assert deleted.before == updated.after and deleted.after is None
    source = created.source
    assert (source["connector"], source["db"], source["schema"], source["table"]) == (
        "postgresql",
        connection.settings_dict["NAME"],
        "public",
        "events_testapp_cdcitem",
    )
    assert (
        source["snapshot"] == "false" and isinstance(source["txId"], int) and source["lsn"] < updated.source["lsn"] < deleted.source["lsn"]
    )
    assert created.ts_ms >= source["ts_ms"] > 0


def test_snapshot_emits_existing_rows_as_reads_then_streams(make_topic, slot):
    # One partition: the order asserted is the relay's publish order (Kafka orders per partition).
    topic = make_topic(partitions=1)
    CdcItem.objects.bulk_create([CdcItem(id=n, name=f"item {n}") for n in range(1, 4)])
    relay = relay_for(slot, topic, snapshot_mode="initial")
    relay.setup()
    CdcItem.objects.create(id=4, name="item 4")
    poll_until(relay, 1)
    relay.close()
    parsed = [event for _, event in events(read_topic(topic, expected=4))]
    assert [(e.op, e.after["id"]) for e in parsed] == [("r", 1), ("r", 2), ("r", 3), ("c", 4)]
    assert [e.source["snapshot"] for e in parsed] == ["true", "true", "last", "false"]
    with connect("default") as conn:
        assert not conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", [f"{slot}_snapshot"]).fetchone()


def test_relay_dying_before_acknowledging_delivers_again_and_the_effect_happens_once(make_topic, slot):
    topic = make_topic()
    relay = relay_for(slot, topic)
    relay.setup()
    for n in range(1, 6):
        CdcItem.objects.create(id=n, name=f"v{n}")
    changes, _ = relay.read_batch()
    futures = [future for change in changes for future in relay._send(change)]
    relay._await(futures)  # published, then the relay dies before pg_replication_slot_advance
    relay.close()
    restarted = relay_for(slot, topic)
    restarted.setup()
    poll_until(restarted, 5)
    assert restarted.poll_once() == 0  # acknowledged: nothing is read a third time
    restarted.close()
    assert len(read_topic(topic, expected=10)) == 10
    run = unique("run")
    spec = ConsumerSpec(
        name=unique("events-test.cdc"),
        topics=(topic,),
        handler=lambda m: Effect.objects.create(run=run, value=str(parse_change_event(m.value).after["id"])),
        group_id=unique("events-test-group"),
        alias="default",
        processed_model=ProcessedMessage,
    )
    stop = threading.Event()
    thread = threading.Thread(target=ConsumerRunner(spec, stop).run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: ProcessedMessage.objects.filter(consumer=spec.name).count() == 5, message="5 distinct changes")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert sorted(Effect.objects.filter(run=run).values_list("value", flat=True)) == ["1", "2", "3", "4", "5"]


def test_relay_process_killed_mid_stream_loses_no_change(make_topic, slot, spawn, subprocess_env):
    topic = make_topic()
    command = (
        "manage.py",
        "cdc",
        "--service",
        "commerce",
        "--slot",
        slot,
        "--capture",
        f"{TABLE}={topic}",
        "--snapshot",
        "never",
        "--batch-size",
        "40",
    )
    env = subprocess_env()
    relay = spawn(*command, env=env, name="cdc")
    wait_for(lambda: "cdc.ready" in relay.output, timeout=60, message="relay ready")
    writer_done = threading.Event()

    def write():
        from django.db import connections

        for n in range(1, 301):
            CdcItem.objects.create(id=n, name=f"n{n}")
            if n % 3 == 0:
                CdcItem.objects.filter(pk=n).update(name=f"u{n}")
        connections.close_all()
        writer_done.set()

    writer = threading.Thread(target=write)
    writer.start()
    wait_for(lambda: CdcItem.objects.count() > 100, message="writes under way")
    relay.signal(signal.SIGKILL, group=True)
    relay.wait(timeout=10)
    writer.join(timeout=120)
    with connect("default") as conn:
        assert slot_lag(conn, slot)["lagBytes"] > 0  # the stopped relay's slot holds the WAL back
    spawn(*command, env=env, name="cdc-restarted")
    records = read_topic(topic, expected=400, timeout=60)
    changes = {(e.op, e.after["id"], e.after["name"]) for _, e in events(records)}
    assert changes == {("c", n, f"n{n}") for n in range(1, 301)} | {("u", n, f"u{n}") for n in range(3, 301, 3)}
    with connect("default") as conn:
        state = wait_for(lambda: (s := slot_lag(conn, slot)) and s["confirmedFlushLsn"] and s, message="slot state")
        assert state["slot"] == slot
