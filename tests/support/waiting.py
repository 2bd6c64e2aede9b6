"""Polling for a condition, shared by the tests and the benchmarks that reuse test fixtures."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable, *, timeout: float = 20.0, interval: float = 0.1, message: str = "condition"):
    """Poll `condition` until it returns something truthy (returned), or fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {message}")
        time.sleep(interval)
