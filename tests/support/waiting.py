"""Polling for a condition, shared by the tests and the benchmarks that reuse test fixtures.

A timeout here is patience, never a speed assertion (speed is measured by scripts/bench): CI
shares two cores with everything else on the machine, and a broker group that misses a heartbeat
while the machine stalls needs a new join before it consumes again. `TEST_PATIENCE` (default 3)
multiplies every wait, so a passing run is no slower and a stalled one still passes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

PATIENCE = float(os.environ.get("TEST_PATIENCE", "3"))


def patience(seconds: float) -> float:
    """How long to wait for something that normally takes well under `seconds`."""
    return seconds * PATIENCE


def wait_for(condition: Callable, *, timeout: float = 20.0, interval: float = 0.1, message: str = "condition"):
    """Poll `condition` until it returns something truthy (returned), or fail after `timeout`
    (times the patience)."""
    allowed = patience(timeout)
    deadline = time.monotonic() + allowed
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {allowed:.0f} s waiting for {message}")
        time.sleep(interval)
