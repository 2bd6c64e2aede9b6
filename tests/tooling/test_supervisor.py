"""merchant_platform.supervisor with real processes: a dying server stops the rest, a finished
background program does not, a signal stops everything cleanly, a stubborn child is killed."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from tests.support.waiting import patience, wait_for
from tests.tooling.conftest import platform_env

SUPERVISE = """
import json, sys
import django
django.setup()  # the key=value logging of the platform
from merchant_platform.supervisor import Program, Supervisor
programs = [Program(name, tuple(argv), kind) for name, argv, kind in json.loads(sys.argv[1])]
sys.exit(Supervisor(programs, stop_timeout=float(sys.argv[2])).run())
"""


def supervise(start_process, python, programs, *, stop_timeout=5.0):
    return start_process([python, "-c", SUPERVISE, json.dumps(programs), str(stop_timeout)], env=platform_env())


def running_sleepers(marker: str) -> list[str]:
    """Pids of this test's `sleep <marker>` processes."""
    result = subprocess.run(["pgrep", "-f", f"^sleep {re.escape(marker)}$"], capture_output=True, text=True, check=False)
    return result.stdout.split()


@pytest.fixture
def marker(request):
    # A unique sleep length marks this test's children, so pgrep finds them and nothing else.
    return f"{300 + (abs(hash(request.node.name)) % 600)}.{int(time.time() * 1000) % 1000:03d}"


def test_a_dying_server_stops_the_rest_and_the_status_is_non_zero(start_process, python, marker):
    supervisor = supervise(
        start_process,
        python,
        [
            ["long", ["sleep", marker], "server"],
            ["done", ["true"], "background"],
            ["dies", ["sh", "-c", "sleep 1; exit 3"], "server"],
        ],
    )
    assert supervisor.wait(timeout=patience(20)) == 3, supervisor.log.read_text()
    assert "serve.finished" in supervisor.log.read_text()
    wait_for(lambda: not running_sleepers(marker), timeout=10, message="the sleep processes to end")


def test_sigterm_stops_every_program_and_exits_zero(start_process, python, marker):
    supervisor = supervise(start_process, python, [["a", ["sleep", marker], "server"], ["b", ["sleep", marker], "background"]])
    wait_for(lambda: len(running_sleepers(marker)) == 2, timeout=10, message="the sleep processes to start")
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=patience(20)) == 0
    assert not running_sleepers(marker)


def test_a_program_that_ignores_sigterm_is_killed_after_the_timeout(start_process, python, marker):
    stubborn = ["sh", "-c", f"trap '' TERM; sleep {marker}; true"]
    supervisor = supervise(start_process, python, [["stubborn", stubborn, "server"]], stop_timeout=1.0)
    wait_for(lambda: running_sleepers(marker), timeout=10, message="the sleep processes to start")
    supervisor.send_signal(signal.SIGINT)
    assert supervisor.wait(timeout=patience(20)) == 0
    wait_for(lambda: not running_sleepers(marker), timeout=10, message="the sleep processes to end")
    assert "serve.killed" in supervisor.log.read_text()


def test_children_die_with_a_killed_supervisor(start_process, python, marker):
    supervisor = supervise(start_process, python, [["a", ["sleep", marker], "server"]])
    wait_for(lambda: running_sleepers(marker), timeout=10, message="the sleep processes to start")
    supervisor.send_signal(signal.SIGKILL)
    supervisor.wait(timeout=patience(10))
    wait_for(lambda: not running_sleepers(marker), timeout=10, message="the sleep processes to end")
