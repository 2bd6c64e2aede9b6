"""Loopback TCP ports for the servers a test starts, and waiting until one answers.

`free_port()` is a port the system had free a moment ago; nothing listens on it, so it also serves as
an address that refuses connections. An area whose servers a parallel run of another area could
race for (a gateway and its upstreams, a whole platform) takes its ports from a range of its own,
`free_port(within)` or `free_ports(count, within=...)`. A range is handed out in turn from where the
last call stopped, so ports asked for one after the other differ even before their servers bind them."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time

import requests

_cursors: dict[range, int] = {}


def free_port(within: range | None = None) -> int:
    if within is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]
    start = _cursors.get(within, 0)
    for step in range(len(within)):
        index = (start + step) % len(within)
        if _bindable(within[index]):
            _cursors[within] = index + 1
            return within[index]
    raise RuntimeError(f"no free port in {within}")


def free_ports(count: int, *, within: range) -> list[int]:
    ports = [free_port(within) for _ in range(count)]
    if len(set(ports)) < count:
        raise RuntimeError(f"fewer than {count} free ports in {within}")
    return ports


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def answers_http(port: int) -> bool:
    """Whether an HTTP server on `port` answers anything at all."""
    try:
        requests.get(f"http://127.0.0.1:{port}/", timeout=1)
    except requests.RequestException:
        return False
    return True


def wait_for_port(port: int, *, process: subprocess.Popen | None = None, seconds: float = 30.0) -> None:
    """Until something accepts on `port`; fails early when `process` (the server) has exited."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} before port {port} answered")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing answered on port {port} within {seconds:.0f} s")
