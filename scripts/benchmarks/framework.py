"""The benchmark framework: start servers, put HTTP load on them with wrk, collect and print results.

A target (scripts/benchmarks/<target>.py) exposes `run(ctx: Context) -> list[dict]`. It starts what
it measures with `ctx.server(...)`, `ctx.gateway(...)` or `ctx.platform(...)` (context managers that
stop their processes on exit), measures HTTP with `ctx.load(...)` and anything else with
`ctx.record(...)` / `ctx.rate(...)`. Every result is a flat dict; run.py prints them as a table.

Everything listens on 127.0.0.1 only, and every measurement is bounded in time (`--duration`).
The machine has 2 cores and wrk runs on the same cores as the servers it loads, so each figure is
what the server managed while sharing the CPU with the load generator. Next to each figure the
framework reports the servers' CPU time per request and the CPU everything else on the machine used
meanwhile (a figure taken while other jobs ran is noisy; `--nice` ranks the bench's sessions first).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import secrets
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO_ROOT / "scripts"
BIN_DIR = Path(sys.executable).parent
WRK = shutil.which("wrk") or "/usr/bin/wrk"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/merchant_platform_bench"
# The product's settings with the bench-only routes added (never part of the product's URLs).
PLATFORM_SETTINGS = "benchmarks.platform_settings"
PLATFORM_WSGI_APP = "merchant_platform.wsgi:application"
PLATFORM_ASGI_APP = "merchant_platform.asgi:application"
# What `manage.py serve` runs: the gateway's config and the WSGI server's settings (its post_fork
# hook leases each worker's snowflake id); the bench measures these very files.
GATEWAY_TEMPLATE = REPO_ROOT / "deploy" / "nginx" / "all-in-one.conf.template"
GUNICORN_CONFIG = REPO_ROOT / "deploy" / "gunicorn.conf.py"

# Ports for the servers each target starts (docs: /work/helpers/CONVENTIONS.md), below the
# ephemeral range (32768-60999) so a client socket never holds one.
PORT_RANGES = {
    "base": range(18000, 18050),
    "servers": range(18050, 18100),
    "stack": range(18050, 18100),
    "events": range(18100, 18200),
    "identity": range(18200, 18300),
    "outreach": range(18300, 18400),
    "licensing": range(18400, 18500),
    "taxation": range(18600, 18700),
    "inventory": range(18700, 18800),
    "signal": range(18800, 18850),
    "payment": range(18850, 18900),
    "commerce": range(19100, 19200),
    "finance": range(18900, 19000),
    "checkout": range(19200, 19300),  # tests/checkout uses 19300-19349 (not a bench)
    "soak": range(19400, 19450),  # tests/bench/test_soak.py uses 19450-19499
}
FALLBACK_PORTS = range(18500, 18600)

START_TIMEOUT_SECONDS = 60.0
QUIET_CPU_PCT = 15
STOP_TIMEOUT_SECONDS = 10.0


class BenchmarkError(RuntimeError):
    """A benchmark could not run (a server did not start, an endpoint answered the wrong status)."""


@dataclass(frozen=True)
class ServerSpec:
    """One way to serve an application: the program, its worker processes and threads per worker.

    server: gunicorn (sync workers when threads == 1, gthread otherwise), granian, uvicorn or daphne.
    interface: wsgi or asgi (gunicorn is WSGI only; uvicorn and daphne are ASGI only).
    """

    server: str
    interface: str = "wsgi"
    workers: int = 1
    threads: int = 1
    options: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if self.server == "gunicorn":
            kind = "gthread" if self.threads > 1 else "sync"
            return f"gunicorn {kind} w{self.workers}" + (f"xt{self.threads}" if self.threads > 1 else "")
        if self.server == "granian":
            threads = f"xbt{self.threads}" if self.interface == "wsgi" else ""
            return f"granian {self.interface} w{self.workers}{threads}" + (" " + " ".join(self.options) if self.options else "")
        if self.server == "daphne":
            return "daphne" + (" " + " ".join(self.options) if self.options else "")
        return f"{self.server} w{self.workers}" + (" " + " ".join(self.options) if self.options else "")

    def command(self, app: str, port: int) -> list[str]:
        host = "127.0.0.1"
        if self.server == "gunicorn":
            worker_class = "gthread" if self.threads > 1 else "sync"
            # The platform runs with serve's own gunicorn settings; the flags below override them.
            config = [f"--config={GUNICORN_CONFIG}"] if app == PLATFORM_WSGI_APP and GUNICORN_CONFIG.exists() else []
            return [
                str(BIN_DIR / "gunicorn"),
                *config,
                app,
                f"--bind={host}:{port}",
                f"--workers={self.workers}",
                f"--threads={self.threads}",
                f"--worker-class={worker_class}",
                "--backlog=2048",
                "--graceful-timeout=5",
                "--log-level=warning",
                *self.options,
            ]
        if self.server == "granian":
            threads = [f"--blocking-threads={self.threads}"] if self.interface == "wsgi" else []
            return [
                str(BIN_DIR / "granian"),
                f"--interface={self.interface}",
                f"--host={host}",
                f"--port={port}",
                f"--workers={self.workers}",
                *threads,
                "--log-level=warning",
                *self.options,
                app,
            ]
        if self.server == "uvicorn":
            return [
                str(BIN_DIR / "uvicorn"),
                app,
                f"--host={host}",
                f"--port={port}",
                f"--workers={self.workers}",
                "--log-level=warning",
                "--no-access-log",
                *self.options,
            ]
        if self.server == "daphne":
            return [str(BIN_DIR / "daphne"), "-b", host, "-p", str(port), "-v", "0", *self.options, app]
        raise BenchmarkError(f"unknown server {self.server!r}")


# What `manage.py serve` should run, chosen by `scripts/bench servers` (figures and reasons in
# docs/performance.md): granian's WSGI mode for REST, uvicorn (uvloop, httptools) for WebSocket.
# Other targets use them unless they measure an alternative.
PLATFORM_WSGI = ServerSpec("granian", "wsgi", workers=2, threads=2)
PLATFORM_ASGI = ServerSpec("uvicorn", "asgi", workers=1, options=("--loop=uvloop", "--http=httptools"))


class ManagedProcess:
    """A child process in its own process group, its output in a log file, stopped on exit."""

    def __init__(self, name: str, command: list[str], *, port: int, env: dict[str, str], log_dir: Path, cwd: Path = REPO_ROOT):
        self.name = name
        self.command = command
        self.port = port
        self.env = env
        self.cwd = cwd
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self, *, nice: int | None = None) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603  (a fixed program with our own arguments)
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if nice is not None:
            set_session_priority(self.process.pid, nice)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        # Workers left behind by a master that died first share its process group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CPU_COUNT = os.cpu_count() or 1


def set_session_priority(pid: int, nice: int) -> None:
    """Give the session of `pid` (a new session: its own scheduler autogroup, with every process it
    forks) the priority `nice`. Linux shares the CPU between autogroups first, so a process's own
    nice value alone does not rank it above another session's work."""
    autogroup = Path(f"/proc/{pid}/autogroup")
    if autogroup.exists():
        autogroup.write_text(str(nice))
    os.setpriority(os.PRIO_PROCESS, pid, nice)


@contextlib.contextmanager
def session_priority(nice: int | None) -> Iterator[None]:
    """Run this process's session (the load generator runs in it) at `nice`, restored on exit."""
    if nice is None:
        yield
        return
    autogroup = Path(f"/proc/{os.getpid()}/autogroup")
    previous = int(autogroup.read_text().split()[-1]) if autogroup.exists() else 0
    previous_own = os.getpriority(os.PRIO_PROCESS, 0)
    set_session_priority(os.getpid(), nice)
    try:
        yield
    finally:
        if autogroup.exists():
            autogroup.write_text(str(previous))
        os.setpriority(os.PRIO_PROCESS, 0, previous_own)


def process_group_cpu_seconds(groups: set[int]) -> float:
    """CPU time (user + system) used so far by every live process of the given process groups."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) in groups:
            total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


class CpuMeter:
    """CPU spent during a measurement: by the servers (their process groups, per request), by the
    load generator (wrk as a child process, or this process's own client), and by everything else
    on the machine (other_cpu_pct: a share of all cores; high values mean a noisy figure)."""

    def __init__(self, groups: set[int]):
        self.groups = groups
        self.started = time.monotonic()
        self.busy = machine_busy_seconds()
        self.server = process_group_cpu_seconds(groups)
        self.client = _own_cpu_seconds()

    def stop(self, operations: int) -> dict:
        wall = time.monotonic() - self.started
        server = process_group_cpu_seconds(self.groups) - self.server
        client = _own_cpu_seconds() - self.client
        other = max(0.0, machine_busy_seconds() - self.busy - server - client)
        return {
            "cpu_us_per_req": round(server * 1e6 / max(1, operations)),
            "client_cpu_pct": round(client / (wall * CPU_COUNT) * 100),
            "other_cpu_pct": round(other / (wall * CPU_COUNT) * 100),
        }


def machine_busy_seconds() -> float:
    """CPU time spent by the whole machine (all cores, everything but idle and I/O wait)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def _own_cpu_seconds() -> float:
    """CPU of this process and of its waited-for children (wrk)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def http_request(
    url: str, *, method: str = "GET", body: str | None = None, headers: dict[str, str] | None = None, timeout: float = 5.0
) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _lua_string(text: str) -> str:
    """A Lua long-bracket string literal holding `text` verbatim (Lua drops a first newline)."""
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    opening_newline = "\n" if text.startswith("\n") else ""
    return f"[{'=' * level}[{opening_newline}{text}]{'=' * level}]"


_LUA_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,'
    .. '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


@dataclass(frozen=True)
class Request:
    """One HTTP request wrk sends; several are sent in turn (round robin per connection thread)."""

    path: str
    method: str = "GET"
    body: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def lua_format(self) -> str:
        headers = "{" + ", ".join(f"[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in self.headers) + "}"
        body = _lua_string(self.body) if self.body is not None else "nil"
        return f"wrk.format({_lua_string(self.method)}, {_lua_string(self.path)}, {headers}, {body})"


LUA_CHUNK = 10_000


def wrk_script(requests: list[Request]) -> str:
    """The Lua script: the request(s) to send, and a done() hook printing the summary as JSON."""
    if len(requests) == 1:
        only = requests[0]
        lines = [f"wrk.method = {_lua_string(only.method)}", f"wrk.path = {_lua_string(only.path)}"]
        if only.body is not None:
            lines.append(f"wrk.body = {_lua_string(only.body)}")
        lines += [f"wrk.headers[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in only.headers]
        return "\n".join(lines) + "\n" + _LUA_DONE
    # LuaJIT allows 65,536 constants per function: fill the table from functions of LUA_CHUNK requests.
    chunks = [requests[start : start + LUA_CHUNK] for start in range(0, len(requests), LUA_CHUNK)]
    fills = "".join(
        f"local function fill{n}()\n"
        + "\n".join(f"  prepared[{n * LUA_CHUNK + i + 1}] = {request.lua_format()}" for i, request in enumerate(chunk))
        + "\nend\n"
        for n, chunk in enumerate(chunks)
    )
    calls = "\n".join(f"  fill{n}()" for n in range(len(chunks)))
    return (
        "local prepared = {}\nlocal counter = 0\n"
        f"{fills}init = function(args)\n{calls}\nend\n"
        "request = function()\n  counter = counter % #prepared + 1\n  return prepared[counter]\nend\n" + _LUA_DONE
    )


# A benchmark run's Kafka names: topics (KAFKA_TOPIC_PREFIX) and consumer groups
# (KAFKA_CONSUMER_GROUP_SUFFIX) of its own, derived from the environment's so they differ from those
# of a platform `scripts/run` serves on the same broker: a run beside one once put 3,525 bench events
# on that platform's payment.success.DLQ.
BENCH_TOPIC_MARK = "bench."
BENCH_GROUP_MARK = "-bench"


BENCH_SERVICE_ACCOUNT = "bench"
BENCH_SERVICE_PASSWORD_ENV = "BENCH_SERVICE_PASSWORD"


def bench_service_header(ctx: Context) -> str:
    """The Authorization header of the load generator's service-to-service calls: the bench's own
    account, which only the bench's settings module (platform_settings.py) declares."""
    from merchant_platform.verification.service_accounts import basic_auth_header

    return basic_auth_header(BENCH_SERVICE_ACCOUNT, ctx.env[BENCH_SERVICE_PASSWORD_ENV])


def bench_kafka_env(env: dict[str, str]) -> dict[str, str]:
    """KAFKA_TOPIC_PREFIX and KAFKA_CONSUMER_GROUP_SUFFIX for a run in `env` (idempotent)."""
    prefix, suffix = env.get("KAFKA_TOPIC_PREFIX", ""), env.get("KAFKA_CONSUMER_GROUP_SUFFIX", "")
    return {
        "KAFKA_TOPIC_PREFIX": prefix if prefix.endswith(BENCH_TOPIC_MARK) else prefix + BENCH_TOPIC_MARK,
        "KAFKA_CONSUMER_GROUP_SUFFIX": suffix if suffix.endswith(BENCH_GROUP_MARK) else suffix + BENCH_GROUP_MARK,
    }


@dataclass
class Context:
    """What a target gets: settings of the run, port and process management, and the results."""

    target: str = "base"
    duration: float = 10.0
    warmup: float = 2.0
    connections: int = 64
    wrk_threads: int = 1
    repeat: int = 1
    settle: float = 0.0
    nice: int | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    results: list[dict] = field(default_factory=list)
    verbose: bool = True

    def __post_init__(self) -> None:
        self.env.update(bench_kafka_env(self.env))
        # The bench's own service account (platform_settings.py), with a password of this run's.
        self.env.setdefault(BENCH_SERVICE_PASSWORD_ENV, secrets.token_urlsafe(24))
        self.work_dir = Path(tempfile.mkdtemp(prefix=f"bench-{self.target}-"))
        self._processes: list[ManagedProcess] = []
        self._django_ready = False

    # ------------------------------------------------------------------ environment and database
    @property
    def database_url(self) -> str:
        return self.env["DATABASE_URL"]

    def server_env(self, settings_module: str = PLATFORM_SETTINGS, **extra: str) -> dict[str, str]:
        """The environment of a server process: the run's environment plus the bench's import path."""
        env = dict(self.env)
        env["DJANGO_SETTINGS_MODULE"] = settings_module
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(SCRIPTS_DIR), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.update(extra)
        return env

    def manage(self, *args: str) -> None:
        """Run `manage.py <args>` with the run's environment (product settings)."""
        command = [sys.executable, str(REPO_ROOT / "manage.py"), *args]
        completed = subprocess.run(command, cwd=REPO_ROOT, env=self.server_env("settings"), capture_output=True, text=True, check=False)  # noqa: S603
        if completed.returncode != 0:
            raise BenchmarkError(f"manage.py {' '.join(args)} failed:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")

    def prepare_database(self) -> None:
        """Create the bench database when missing and migrate every alias (`manage.py migrate`)."""
        import psycopg
        from psycopg import sql

        info = psycopg.conninfo.conninfo_to_dict(self.database_url)
        name = info.pop("dbname")
        with psycopg.connect(**{**info, "dbname": "postgres"}, autocommit=True) as connection:
            exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if not exists:
                connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.manage("migrate", "--verbosity=0")

    def django(self) -> None:
        """Set up Django in this process (product settings plus bench routes) to prepare data."""
        if self._django_ready:
            return
        import django

        os.environ.update(bench_kafka_env(self.env))  # never the platform's topics, even when the shell names them
        for key, value in self.server_env().items():
            os.environ.setdefault(key, value)
        for path in (str(REPO_ROOT), str(SCRIPTS_DIR)):
            if path not in sys.path:
                sys.path.insert(0, path)
        django.setup()
        self._django_ready = True

    # ------------------------------------------------------------------ ports and processes
    def free_port(self) -> int:
        taken = {process.port for process in self._processes if process.alive()}
        for port in [*PORT_RANGES.get(self.target, FALLBACK_PORTS), *FALLBACK_PORTS]:
            if port in taken:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
        raise BenchmarkError(f"no free port left for target {self.target}")

    def _start(self, process: ManagedProcess, ready_url: str | None) -> None:
        port = process.port
        self._processes.append(process)
        process.start(nice=self.nice)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if not process.alive():
                raise BenchmarkError(f"{process.name} exited during start:\n{process.log_tail()}")
            with contextlib.suppress(OSError):  # not listening yet: try again until the deadline
                if ready_url is None:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    return
                status, _ = http_request(ready_url, timeout=2)
                if status < 500:
                    return
            if time.monotonic() > deadline:
                raise BenchmarkError(
                    f"{process.name} did not answer {ready_url or port} within {START_TIMEOUT_SECONDS:.0f} s:\n{process.log_tail()}"
                )
            time.sleep(0.1)

    @contextlib.contextmanager
    def server(
        self,
        spec: ServerSpec,
        app: str,
        *,
        settings_module: str = PLATFORM_SETTINGS,
        ready_path: str | None = "/healthz",
        env: dict[str, str] | None = None,
    ) -> Iterator[str]:
        """Run `app` ("module:attribute") under `spec`; yields its base URL (http://127.0.0.1:port)."""
        port = self.free_port()
        name = f"{spec.label.replace(' ', '-')}-{port}"
        process = ManagedProcess(
            name, spec.command(app, port), port=port, env=self.server_env(settings_module, **(env or {})), log_dir=self.work_dir
        )
        base_url = f"http://127.0.0.1:{port}"
        try:
            self._start(process, base_url + ready_path if ready_path else None)
            self.say(f"  started {spec.label} on :{port} ({app})")
            yield base_url
        finally:
            process.stop()

    @contextlib.contextmanager
    def process(
        self,
        name: str,
        command: list[str],
        *,
        ready: Callable[[], bool],
        settings_module: str = "settings",
        env: dict[str, str] | None = None,
    ) -> Iterator[ManagedProcess]:
        """Run a process that serves no port (a CDC relay, a consumer, a Celery worker) in its own
        session at the run's priority, its CPU counted with the servers'; waits until `ready()`."""
        process = ManagedProcess(name, command, port=0, env=self.server_env(settings_module, **(env or {})), log_dir=self.work_dir)
        self._processes.append(process)
        try:
            process.start(nice=self.nice)
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while not ready():
                if not process.alive():
                    raise BenchmarkError(f"{name} exited during start:\n{process.log_tail()}")
                if time.monotonic() > deadline:
                    raise BenchmarkError(f"{name} was not ready within {START_TIMEOUT_SECONDS:.0f} s:\n{process.log_tail()}")
                time.sleep(0.1)
            self.say(f"  started {name}")
            yield process
        finally:
            process.stop()

    @contextlib.contextmanager
    def gateway(self, wsgi_url: str, asgi_url: str | None = None) -> Iterator[str]:
        """Run nginx in front of the servers (REST to WSGI, /stream to ASGI); yields its base URL."""
        port = self.free_port()
        directory = Path(tempfile.mkdtemp(prefix="nginx-", dir=self.work_dir))
        config = render_gateway_config(directory, port, wsgi_url, asgi_url or wsgi_url)
        process = ManagedProcess(
            f"nginx-{port}",
            [NGINX, "-p", f"{directory}/", "-c", str(config), "-e", str(directory / "log" / "error.log")],
            port=port,
            env=dict(self.env),
            log_dir=self.work_dir,
        )
        base_url = f"http://127.0.0.1:{port}"
        try:
            self._start(process, base_url + "/healthz")
            self.say(f"  started nginx gateway on :{port} -> {wsgi_url}")
            yield base_url
        finally:
            process.stop()

    @contextlib.contextmanager
    def platform(self, *, gateway: bool = True, spec: ServerSpec = PLATFORM_WSGI, env: dict[str, str] | None = None) -> Iterator[str]:
        """The all-in-one REST platform (product settings, bench routes added) under the chosen WSGI
        server, behind the nginx gateway unless gateway=False; yields the base URL to load."""
        with self.server(spec, PLATFORM_WSGI_APP, env=env) as wsgi_url:
            if not gateway:
                yield wsgi_url
                return
            with self.gateway(wsgi_url) as gateway_url:
                yield gateway_url

    def server_pid(self, base_url: str) -> int:
        """The process id of a running server started by `server()` (for memory figures)."""
        port = int(base_url.rsplit(":", 1)[1])
        return next(process.process.pid for process in self._processes if process.port == port and process.alive())

    def close(self) -> None:
        for process in self._processes:
            process.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    # ------------------------------------------------------------------ measuring
    def say(self, message: str) -> None:
        if self.verbose:
            print(message, flush=True)

    def load(
        self,
        name: str,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: dict[str, str] | None = None,
        requests: list[Request] | None = None,
        expect_status: int | tuple[int, ...] = 200,
        connections: int | None = None,
        duration: float | None = None,
        **labels,
    ) -> dict:
        """Put HTTP load on `url` with wrk and return (and record) the result.

        `url` is the base URL plus the path of the single request; `requests` (paths relative to
        the same host) replaces it with several requests sent in turn. One request first checks the
        endpoint answers `expect_status`; then a warm-up run (discarded) and the measured run.
        """
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if requests is None:
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            requests = [Request(path or "/", method, body, tuple((headers or {}).items()))]
        expected = (expect_status,) if isinstance(expect_status, int) else tuple(expect_status)
        for request in requests[:3]:
            status, reply = http_request(origin + request.path, method=request.method, body=request.body, headers=dict(request.headers))
            if status not in expected:
                raise BenchmarkError(f"{name}: {request.method} {request.path} answered {status} (expected {expected}): {reply[:300]!r}")
        script = self.work_dir / f"wrk-{len(self.results)}.lua"
        script.write_text(wrk_script(requests))
        connections = connections or self.connections
        duration = duration or self.duration
        self.wait_for_quiet_machine()
        if self.warmup > 0:
            self._wrk(origin, script, connections, self.warmup)
        runs = []
        for _ in range(self.repeat):
            meter = CpuMeter(self._server_groups())
            summary, command = self._wrk(origin, script, connections, duration)
            cpu = meter.stop(summary["requests"])
            seconds = summary["duration_us"] / 1e6
            runs.append(
                {
                    "target": self.target,
                    "name": name,
                    **labels,
                    "connections": connections,
                    "duration_s": round(seconds, 1),
                    "requests": summary["requests"],
                    "rps": round(summary["requests"] / seconds, 1),
                    "p50_ms": round(summary["p50_us"] / 1000, 2),
                    "p99_ms": round(summary["p99_us"] / 1000, 2),
                    "max_ms": round(summary["max_us"] / 1000, 2),
                    "errors": summary["connect"] + summary["read"] + summary["write"] + summary["timeout"],
                    "non_2xx": summary["status"],
                    **cpu,
                    "wrk": command,
                }
            )
        result = self._median(runs, "rps")
        self.results.append(result)
        self.say(
            f"  {name}: {result['rps']:.0f} req/s, p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, errors {result['errors']}, "
            f">=400 {result['non_2xx']}, server CPU {result['cpu_us_per_req']} us/req, other load {result['other_cpu_pct']}%"
        )
        return result

    def wait_for_quiet_machine(self) -> None:
        """On a shared machine, wait (at most `settle` seconds) until other processes use less than
        QUIET_CPU_PCT of the cores, so a measurement does not start in the middle of someone's build."""
        deadline = time.monotonic() + self.settle
        while time.monotonic() < deadline:
            busy = machine_busy_seconds()
            time.sleep(1.0)
            used_pct = (machine_busy_seconds() - busy) / CPU_COUNT * 100
            if used_pct < QUIET_CPU_PCT:
                return
        if self.settle > 0:
            self.say(f"  (the machine stayed busy for {self.settle:.0f} s; measuring anyway)")

    def _server_groups(self) -> set[int]:
        return {process.process.pid for process in self._processes if process.alive()}

    @staticmethod
    def _median(runs: list[dict], key: str) -> dict:
        """The run with the median `key`; with several runs, the spread and the failures of all."""
        ordered = sorted(runs, key=lambda run: run[key])
        result = dict(ordered[(len(ordered) - 1) // 2])
        if len(runs) > 1:
            result[f"{key}_min"], result[f"{key}_max"] = ordered[0][key], ordered[-1][key]
            result["runs"] = len(runs)
            for failures in ("errors", "non_2xx"):
                if failures in result:
                    result[failures] = sum(run[failures] for run in runs)
        return result

    def _wrk(self, origin: str, script: Path, connections: int, duration: float) -> tuple[dict, str]:
        command = [WRK, f"-t{self.wrk_threads}", f"-c{connections}", f"-d{duration:g}s", "--timeout=5s", "-s", str(script), origin]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=duration + 30, check=False)  # noqa: S603
        for line in completed.stdout.splitlines():
            if line.startswith("BENCH_JSON "):
                return json.loads(line.removeprefix("BENCH_JSON ")), shlex.join(
                    [Path(WRK).name, *command[1:4], "--timeout=5s", "-s", "<script>", origin]
                )
        raise BenchmarkError(f"wrk gave no summary (exit {completed.returncode}):\n{completed.stdout}\n{completed.stderr}")

    def websocket_echo(
        self, name: str, url: str, *, connections: int | None = None, duration: float | None = None, message: str = "x" * 64, **labels
    ) -> dict:
        """Open `connections` WebSockets to `url`, then send a message and await its echo on each
        for `duration` seconds; records round trips per second and their latency. The client is
        Python (asyncio, uvloop when installed) in this process, on the same cores as the server."""
        connections = connections or self.connections
        duration = duration or self.duration
        self.wait_for_quiet_machine()
        if self.warmup > 0:
            _run_async(_echo_load(url, connections, self.warmup, message))
        runs = []
        for _ in range(self.repeat):
            meter = CpuMeter(self._server_groups())
            latencies, failures, seconds = _run_async(_echo_load(url, connections, duration, message))
            count = len(latencies)
            if not count:
                raise BenchmarkError(f"{name}: no WebSocket round trip completed ({failures} connections failed)")
            runs.append(
                {
                    "target": self.target,
                    "name": name,
                    **labels,
                    "connections": connections,
                    "duration_s": round(seconds, 1),
                    "requests": count,
                    "rate": round(count / seconds, 1),
                    "unit": "echo/s",
                    "p50_ms": round(percentile(latencies, 50), 2),
                    "p99_ms": round(percentile(latencies, 99), 2),
                    "errors": failures,
                    **meter.stop(count),
                }
            )
        result = self._median(runs, "rate")
        self.results.append(result)
        self.say(
            f"  {name}: {result['rate']:.0f} echo/s, p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, failures {result['errors']}"
        )
        return result

    def record(self, name: str, **fields) -> dict:
        """Record a result that is not an HTTP load (a throughput measured by the target itself)."""
        result = {"target": self.target, "name": name, **fields}
        self.results.append(result)
        self.say(f"  {name}: " + ", ".join(f"{key} {value}" for key, value in fields.items()))
        return result

    def rate(
        self, name: str, count: int, seconds: float, *, unit: str = "ops/s", latencies_ms: list[float] | None = None, **fields
    ) -> dict:
        """Record `count` operations done in `seconds` (and their latency percentiles when given)."""
        extra = dict(fields)
        if latencies_ms:
            extra.update(p50_ms=round(percentile(latencies_ms, 50), 2), p99_ms=round(percentile(latencies_ms, 99), 2))
        return self.record(name, count=count, duration_s=round(seconds, 1), rate=round(count / seconds, 1), unit=unit, **extra)


def load1() -> float:
    """The 1-minute load average when a figure is taken: on 2 cores, above ~2 means other work
    shared the CPU with the measurement."""
    return round(os.getloadavg()[0], 1)


def produce_keyed(topic: str, values: list[tuple[str, dict]]) -> None:
    """Send (key, JSON value) records to `topic`, each with the key as its messageId header."""
    from merchant_platform.messaging.producer import close_producer, get_producer

    producer = get_producer()
    for key, value in values:
        producer.send(topic, key=key.encode(), value=json.dumps(value).encode(), headers=[("messageId", key.encode())])
    producer.flush(timeout=60)
    close_producer()


def run_registered_consumer(ctx: Context, name: str, *, consumer: str, topic: str, count: int, unit: str, handler=None) -> dict:
    """The registered batch consumer `consumer` (or `handler` under its spec: alias, processed-message
    table) run by one ConsumerRunner on a thread over the `count` messages of `topic`, in a fresh
    group. The clock runs from the end of the first handled batch to the last, so the group join
    and the first fetch are not counted."""
    import threading
    import uuid

    from merchant_platform.messaging.registry import ConsumerSpec, registered_consumers
    from merchant_platform.messaging.runner import ConsumerRunner, tune_interpreter

    tune_interpreter()
    (registered,) = registered_consumers(names={consumer})
    target = handler or registered.handler
    handled, first_batch, times, done = [0], [0], [0.0, 0.0], threading.Event()

    def handle(messages):
        target(messages)
        now = time.perf_counter()
        if not handled[0]:
            times[0], first_batch[0] = now, len(messages)
        handled[0] += len(messages)
        if handled[0] >= count:
            times[1] = now
            done.set()

    group = f"bench-{ctx.target}-{uuid.uuid4().hex[:8]}"
    spec = ConsumerSpec(**{**registered.__dict__, "topics": (topic,), "group_id": group, "handler": handle})
    stop = threading.Event()
    thread = threading.Thread(target=ConsumerRunner(spec, stop).run, daemon=True)
    thread.start()
    finished = done.wait(timeout=300)
    stop.set()
    thread.join(timeout=30)
    if not finished:
        raise BenchmarkError(f"{name}: handled {handled[0]} of {count} messages in 300 s")
    return ctx.rate(name, count - first_batch[0], times[1] - times[0], unit=unit, load1=load1())


def _run_async(coroutine):
    import asyncio

    try:
        import uvloop

        return uvloop.run(coroutine)
    except ImportError:
        return asyncio.run(coroutine)


async def _echo_load(url: str, connections: int, duration: float, message: str) -> tuple[list[float], int, float]:
    """Round-trip latencies (ms) of echoes over `connections` sockets, failed sockets, seconds."""
    import asyncio

    from websockets.asyncio.client import connect

    latencies: list[float] = []
    failures = 0
    sockets = []
    last_error: Exception | None = None
    for _ in range(connections):
        try:
            sockets.append(await connect(url, compression=None, open_timeout=5))
        except (TimeoutError, OSError, ValueError) as exc:
            failures += 1
            last_error = exc
    if not sockets:
        raise BenchmarkError(f"no WebSocket to {url} opened: {last_error}")
    started = time.perf_counter()
    deadline = started + duration

    async def echo(socket) -> None:
        nonlocal failures
        try:
            while (now := time.perf_counter()) < deadline:
                await socket.send(message)
                await socket.recv()
                latencies.append((time.perf_counter() - now) * 1000)
        except Exception:  # a dropped socket counts as a failure; the others go on
            failures += 1

    await asyncio.gather(*(echo(socket) for socket in sockets))
    seconds = time.perf_counter() - started
    await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)
    return latencies, failures, seconds


def percentile(values: list[float], pct: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[min(998, max(0, int(pct * 10) - 1))]


def render_gateway_config(directory: Path, port: int, wsgi_url: str, asgi_url: str) -> Path:
    """Render the all-in-one gateway's config (deploy/nginx/all-in-one.conf.template, the file
    `manage.py serve --gateway` runs) for a gateway on `port` in front of the given servers."""
    from django.template import Context as TemplateContext
    from django.template import Engine

    if not GATEWAY_TEMPLATE.exists():
        raise BenchmarkError(f"{GATEWAY_TEMPLATE.relative_to(REPO_ROOT)} is missing: the gateway cannot be measured")
    for sub in ("tmp", "log", "run"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    values = {
        "listen": f"127.0.0.1:{port}",
        "wsgi": urlsplit(wsgi_url).netloc,
        "asgi": urlsplit(asgi_url).netloc,
        "directory": str(directory),
    }
    config = directory / "nginx.conf"
    config.write_text(Engine().from_string(GATEWAY_TEMPLATE.read_text()).render(TemplateContext(values, autoescape=False)))
    return config


def format_table(results: list[dict], columns: list[str] | None = None) -> str:
    """Results as an aligned text table (the `wrk` command column is left out)."""
    if not results:
        return "(no results)"
    if columns is None:
        columns = []
        for result in results:
            columns += [key for key in result if key not in columns and key not in ("wrk", "command")]
    rows = [[_cell(result.get(column, "")) for column in columns] for result in results]
    widths = [max(len(column), *(len(row[i]) for row in rows)) for i, column in enumerate(columns)]
    line = "  ".join(column.ljust(widths[i]) for i, column in enumerate(columns))
    body = ["  ".join(cell.rjust(widths[i]) if _numeric(cell) else cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    return "\n".join([line, "  ".join("-" * width for width in widths), *body])


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _numeric(cell: str) -> bool:
    return cell.replace(",", "").replace(".", "", 1).lstrip("-").isdigit()
