"""The CDC relay (`manage.py cdc`, its own process) killed with SIGKILL while 20 rows are updated
at a paced 200 writes/s, then started again: every change reaches the topic, and per key the changes
arrive in commit order (a replay after the kill may repeat a run of changes already sent, in order;
consumers drop those by their position, docs/events.md)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from merchant_platform.cdc import parse_change_event
from tests.kernel.events.test_cdc import TABLE
from tests.kernel.events.testapp.models import CdcItem
from tests.support.broker import read_topic
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]
KEYS, ROUNDS, RATE = 20, 30, 200.0  # 600 updates over 3 s


def test_relay_killed_under_200_writes_per_second_delivers_every_change_in_order(make_topic, slot, spawn, subprocess_env):
    topic = make_topic(partitions=3)
    command = ("manage.py", "cdc", "--service", "commerce", "--slot", slot, "--capture", f"{TABLE}={topic}", "--snapshot", "never")
    env = subprocess_env()
    relay = spawn(*command, env=env, name="cdc")
    wait_for(lambda: "cdc.ready" in relay.output, timeout=60, message="relay ready")
    for key in range(1, KEYS + 1):
        CdcItem.objects.create(id=key, name="v000")
    written = [0]

    def write():
        from django.db import connections

        start = time.monotonic()
        for step in range(KEYS * ROUNDS):
            time.sleep(max(0.0, start + step / RATE - time.monotonic()))
            CdcItem.objects.filter(pk=step % KEYS + 1).update(name=f"v{step // KEYS + 1:03d}")
            written[0] += 1
        connections.close_all()

    writer = threading.Thread(target=write)
    writer.start()
    wait_for(lambda: written[0] >= KEYS * ROUNDS // 3, timeout=30, message="a third of the writes")
    relay.signal(signal.SIGKILL, group=True)
    relay.wait(timeout=10)
    spawn(*command, env=env, name="cdc-restarted")
    writer.join(timeout=60)
    assert written[0] == KEYS * ROUNDS

    def versions_by_key() -> dict[int, list[int]]:
        records = sorted(read_topic(topic, expected=KEYS * (ROUNDS + 1), timeout=30), key=lambda r: (r.partition, r.offset))
        found: dict[int, list[int]] = {}
        for record in records:
            change = parse_change_event(record.value)
            found.setdefault(change.after["id"], []).append(int(change.after["name"][1:]))
        return found

    def complete() -> dict[int, list[int]] | None:
        found = versions_by_key()
        return found if len(found) == KEYS and all(sequence[-1] == ROUNDS for sequence in found.values()) else None

    versions = wait_for(complete, timeout=90, interval=1, message="every key's last change")
    assert set(versions) == set(range(1, KEYS + 1))
    for key, sequence in versions.items():
        firsts = list(dict.fromkeys(sequence))
        lasts = list(dict.fromkeys(reversed(sequence)))[::-1]
        assert firsts == lasts == list(range(ROUNDS + 1)), (key, sequence)  # every change, in order, repeats only as a replay
