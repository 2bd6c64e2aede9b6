"""A small process supervisor for `manage.py serve`.

It starts each program in its own session (so a terminal's Ctrl-C reaches only the supervisor,
which then stops the children in order), forwards SIGINT/SIGTERM as SIGTERM, and stops everything
when a program dies: a server (or a background program that fails) stopping is fatal, the
supervisor then exits non-zero. A background program that exits 0 has finished its work (nothing
to consume, say) and the rest keep running. Children die with the supervisor even when it is
killed outright (PR_SET_PDEATHSIG on Linux).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from merchant_platform.logging import get_logger

log = get_logger(__name__)

SERVER, BACKGROUND = "server", "background"
POLL_SECONDS = 0.2
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Program:
    name: str
    argv: tuple[str, ...]
    kind: str = SERVER
    # Environment changes for this program: a value sets the variable, None removes it.
    env: dict[str, str | None] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        for name, value in self.env.items():
            if value is None:
                environment.pop(name, None)
            else:
                environment[name] = value
        return environment


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the supervisor dies, however it dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    def __init__(self, programs: list[Program], *, stop_timeout: float = 15.0):
        self.programs = programs
        self.stop_timeout = stop_timeout
        self.running: dict[str, subprocess.Popen] = {}
        self._stop_signal: int | None = None

    def _request_stop(self, signum, _frame) -> None:
        self._stop_signal = signum

    def run(self) -> int:
        """Start every program and supervise them; the exit status for the command."""
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._request_stop)
        try:
            for program in self.programs:
                self._start(program)
            status = self._watch()
        finally:
            self._stop_all()
        return status

    def _start(self, program: Program) -> None:
        # The argv is built by `serve` from fixed parts; preexec_fn is safe here: the supervisor
        # runs no other thread.
        process = subprocess.Popen(  # noqa: S603
            program.argv,
            env=program.environment(),
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )
        self.running[program.name] = process
        log.info("serve.started", program=program.name, pid=process.pid, kind=program.kind)

    def _watch(self) -> int:
        kinds = {program.name: program.kind for program in self.programs}
        while self._stop_signal is None:
            for name, process in list(self.running.items()):
                code = process.poll()
                if code is None:
                    continue
                del self.running[name]
                _kill_group(process)
                if code == 0 and kinds[name] == BACKGROUND:
                    log.info("serve.finished", program=name)
                    continue
                log.error("serve.program_stopped", program=name, exitCode=code)
                return code if code > 0 else 1
            if not self.running:
                return 0
            time.sleep(POLL_SECONDS)
        log.info("serve.stopping", signal=signal.Signals(self._stop_signal).name)
        return 0

    def _stop_all(self) -> None:
        """SIGTERM every program; what still runs after the timeout is killed."""
        for process in self.running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for name, process in self.running.items():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("serve.killed", program=name, afterSeconds=self.stop_timeout)
            _kill_group(process)
            process.wait()
        self.running.clear()


def _kill_group(process: subprocess.Popen) -> None:
    """Kill what is left of a program's process group (a pool's children, say)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(process.pid, signal.SIGKILL)
