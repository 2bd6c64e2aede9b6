"""`scripts/bench soak` (scripts/benchmarks/soak.py): its figures, its memory bound, and the whole
target run for a few seconds against the platform so the harness itself is checked in CI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchmarks import soak
from benchmarks.framework import Context


def test_routes_count_only_inside_the_window():
    routes = soak.Routes()
    routes.add("GET /a", time.monotonic())  # warm-up: not counted
    routes.measuring = True
    for _ in range(3):
        routes.add("GET /a", time.monotonic())
    routes.add("GET /a", time.monotonic(), "503 unavailable")
    (row,) = routes.results(window=2.0)
    assert (row["name"], row["requests"], row["rate"], row["errors"], row["error_pct"]) == ("GET /a", 4, 1.5, 1, 25.0)
    assert row["failures"] == ["503 unavailable"] and row["p99_ms"] >= row["p50_ms"] >= 0


def test_memory_bound_fails_growth_beyond_it_and_an_exited_process():
    mib = 1024

    def info(pid: int, rss_mib: float) -> soak.ProcessInfo:
        return soak.ProcessInfo(pid, "web (granian) child", int(rss_mib * mib))

    idle = {1: info(1, 90), 2: info(2, 90), 3: info(3, 90)}
    start = {1: info(1, 100), 2: info(2, 100), 3: info(3, 100)}
    bound = soak.RSS_BOUND_MIB + soak.RSS_BOUND_SHARE * 100
    end = {1: info(1, 100 + bound), 2: info(2, 100 + bound + 1), 4: info(4, 50)}
    rows = {row["name"]: row for row in soak.rss_results(idle, start, end)}
    assert rows["RSS web (granian) child [1]"]["passed"] is True
    assert rows["RSS web (granian) child [1]"]["rss_idle_mib"] == 90
    assert rows["RSS web (granian) child [2]"]["passed"] is False
    assert rows["RSS web (granian) child [3]"] == {
        "name": "RSS web (granian) child [3]",
        "rss_idle_mib": 90,
        "rss_start_mib": 100,
        "value": "exited during the soak",
        "passed": False,
    }
    assert rows["RSS web (granian) child [4]"]["passed"] is True


def test_snapshot_holds_every_descendant_with_its_resident_memory():
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", child])
    try:
        deadline = time.monotonic() + 10
        while len(snapshot := soak.rss_snapshot({parent.pid})) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(snapshot) == 2 and parent.pid in snapshot
        assert all(process.rss_kib > 1000 for process in snapshot.values())
    finally:
        for pid in soak.rss_snapshot({parent.pid}):
            os.kill(pid, signal.SIGKILL)
        parent.wait()


def test_pause_watch_sees_the_process_stopped():
    pauses = soak.PauseWatch()
    pauses.start()
    try:
        time.sleep(0.3)
        # The process stopped for a second and a half, as a paused VM stops it; the shell started first
        # resumes it. The watch notes lateness past its next tick, so it sees up to one tick less.
        resume = subprocess.Popen(["sh", "-c", f"sleep 1.5; kill -CONT {os.getpid()}"])
        os.kill(os.getpid(), signal.SIGSTOP)
        resume.wait()
        time.sleep(0.3)
    finally:
        pauses.stop()
    assert pauses.longest >= 1.0
    assert pauses.result() == {"name": soak.PAUSE_ROW, "value": round(pauses.longest, 2), "unit": "s"}


FROZEN_SECONDS = 5.0  # the fake provider's IPN timeout; the platform's read timeout towards it is 10 s


def run_soak(monkeypatch) -> dict[str, dict]:
    monkeypatch.setattr(soak, "PORTS", range(19450, 19500))  # not the bench's ports: a bench may run meanwhile
    monkeypatch.setattr(soak, "PLACERS", 2)
    monkeypatch.setattr(soak, "READERS", 1)
    monkeypatch.setattr(soak, "WS_CLIENTS", 2)
    ctx = Context(target="soak", duration=8, warmup=2, verbose=False)
    try:
        return {row["name"]: row for row in soak.run(ctx)}
    finally:
        ctx.close()


def failures(results: dict[str, dict]) -> dict[str, list[str]]:
    """Each route that failed a call, with its first failures."""
    return {name: row.get("failures", []) for name, row in results.items() if "rate" in row and row["errors"]}


def failed(results: dict[str, dict]) -> bool:
    return bool(failures(results)) or any(row.get("passed") is False for row in results.values())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_soak_runs_against_the_platform(monkeypatch):
    results = run_soak(monkeypatch)
    if failed(results) and results[soak.PAUSE_ROW]["value"] >= FROZEN_SECONDS:
        # This process (the load and the fake provider) stood still longer than a call between it and
        # the platform may wait (CI once froze it for 59 s): those calls failed as they should. Again.
        results = run_soak(monkeypatch)
    routes = {name: row for name, row in results.items() if "rate" in row}
    # A loaded CI machine may complete few placings in 8 s; every route that ran answered, and the reads ran.
    assert "GET /inventory/stock" in routes and "WS /stream handshake + subscribe + close" in routes, results
    assert not failures(results), (failures(results), results[soak.PAUSE_ROW])
    assert results["orders acknowledged by IPN and PAID in commerce"]["passed"], results
    assert results["order.paid on every socket (2 sockets)"]["passed"], results
    memory = [row for name, row in results.items() if name.startswith("RSS ")]
    assert any("web (granian) child" in row["name"] for row in memory), memory
    assert all(row["passed"] for row in memory), memory
