"""`manage.py serve`: what one process of the platform runs, by RUN_MODE and topology.

RUN_MODE=migrate migrates every alias of this process's services, runs their seeds, creates their
Kafka topics and exits.
RUN_MODE=startup (the default) supervises this topology's processes (merchant_platform.supervisor):

- web: granian in WSGI mode (REST), WEB_CONCURRENCY workers x WEB_THREADS threads (2 x 2: the
  figures behind the choice are in docs/performance.md); all-in-one on 127.0.0.1:8001, split on
  0.0.0.0:3000. Each worker leases its own snowflake id (merchant_platform.wsgi_server).
- internal (all-in-one only): a second granian WSGI server on 127.0.0.1:8004 (INTERNAL_WSGI_PORT,
  INTERNAL_WEB_CONCURRENCY x INTERNAL_WEB_THREADS, 1 x 4) for calls between services
  (SERVICE_BASE_URL): a request holding a thread of `web` while it calls a sibling (a sale order's
  placing calls taxation, inventory and payment) is answered here, never by a thread of its own
  pool, so concurrent placings cannot starve `web`. Sibling handlers make no sibling calls of their own.
- ws: uvicorn (WebSocket routes); all-in-one on :8002; split on :3001 when the service has any.
- worker, beat: Celery; all-in-one always (every queue); split when the service has tasks (its queue).
- consume (Kafka consumers and the outbox relay), cdc (the WAL relay): `manage.py consume` and
  `manage.py cdc` in both topologies; each exits 0 at once when the process has nothing for it.
- gateway: nginx on :8000, all-in-one with --gateway; split mode sits behind deploy/nginx/split.conf.

SERVE_ROLES (or --roles) narrows the set, e.g. `SERVE_ROLES=web` for an API-only replica.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import sys
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError
from django.template import Context, Engine

from merchant_platform.registry import Service, active_services, is_all_in_one
from merchant_platform.supervisor import BACKGROUND, SERVER, Program, Supervisor
from settings.env import env

ROLES = ("web", "internal", "ws", "worker", "beat", "consume", "cdc", "gateway")
GATEWAY_TEMPLATE = Path(settings.BASE_DIR) / "deploy" / "nginx" / "all-in-one.conf.template"
WSGI_ENTRY = "merchant_platform.wsgi_server:application"
NGINX_CANDIDATES = ("nginx", "/usr/sbin/nginx", "/usr/local/sbin/nginx")


@dataclass(frozen=True)
class Addresses:
    """Where this process's servers listen."""

    host: str
    wsgi_port: int
    internal_port: int
    asgi_port: int
    gateway_host: str
    gateway_port: int


def addresses(*, all_in_one: bool) -> Addresses:
    return Addresses(
        host=env.str("SERVE_HOST", default="127.0.0.1" if all_in_one else "0.0.0.0"),  # noqa: S104 (a container's port)
        wsgi_port=env.int("WSGI_PORT", default=8001 if all_in_one else 3000),
        internal_port=settings.INTERNAL_WSGI_PORT,
        asgi_port=env.int("ASGI_PORT", default=8002 if all_in_one else 3001),
        gateway_host=env.str("GATEWAY_HOST", default="127.0.0.1"),
        gateway_port=env.int("GATEWAY_PORT", default=8000),
    )


def has_websocket_routes(service: Service) -> bool:
    if find_spec(f"{service.module}.routing") is None:
        return False
    return bool(getattr(import_module(f"{service.module}.routing"), "websocket_urlpatterns", None))


def default_roles(services: tuple[Service, ...], *, all_in_one: bool, commands: set[str]) -> list[str]:
    """The roles a topology runs when SERVE_ROLES does not say otherwise (the module's docstring)."""
    if all_in_one:
        return ["web", "internal", "ws", "worker", "beat", *(name for name in ("consume", "cdc") if name in commands)]
    (service,) = services
    roles = ["web"]
    if has_websocket_routes(service):
        roles.append("ws")
    if find_spec(f"{service.module}.tasks") is not None:
        roles += ["worker", "beat"]
    # Both exit 0 at once when the service has nothing for them (no consumer, outbox or capture).
    roles += [name for name in ("consume", "cdc") if name in commands]
    return roles


def worker_id_variable(services: tuple[Service, ...], *, all_in_one: bool) -> str:
    return "APP_ENV_NODE_ID" if all_in_one else services[0].worker_id_env


def find_nginx() -> str:
    for candidate in NGINX_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    raise CommandError("nginx is not installed (scripts/run installs it); the gateway cannot start")


def render_gateway_config(*, directory: Path, listen: str, wsgi: str, asgi: str) -> Path:
    """Render deploy/nginx/all-in-one.conf.template into `directory`; returns the config's path."""
    for sub in ("tmp", "log", "run"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    engine = Engine(autoescape=False)
    text = engine.from_string(GATEWAY_TEMPLATE.read_text()).render(
        Context({"listen": listen, "wsgi": wsgi, "asgi": asgi, "directory": str(directory.resolve())})
    )
    config = directory / "nginx.conf"
    config.write_text(text)
    return config


def gateway_argv(config: Path) -> tuple[str, ...]:
    directory = config.parent.resolve()
    return (find_nginx(), "-p", f"{directory}/", "-c", str(config.resolve()), "-e", str(directory / "log" / "error.log"))


def ensure_ports_free(host: str, ports: dict[str, int]) -> None:
    for name, port in ports.items():
        probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(f"port {port} ({name}) on {host} is already in use: is the platform already running?") from None
            raise CommandError(f"cannot listen on {host}:{port} ({name}): {exc.strerror}") from None
        finally:
            probe.close()


def wsgi_server_argv(where: Addresses, web_env: dict[str, str], *, internal: bool = False) -> tuple[str, ...]:
    """granian's WSGI mode; `web_env` (worker_id_environments) overrides WEB_CONCURRENCY/WEB_THREADS.
    `internal`: the listener for calls between services (INTERNAL_WSGI_PORT, INTERNAL_WEB_*)."""
    environment = {**os.environ, **web_env}
    if internal:
        port, workers, threads = (
            where.internal_port,
            environment.get("INTERNAL_WEB_CONCURRENCY") or 1,
            environment.get("INTERNAL_WEB_THREADS") or 4,
        )
    else:
        port, workers, threads = where.wsgi_port, environment.get("WEB_CONCURRENCY") or 2, environment.get("WEB_THREADS") or 2
    return (
        sys.executable,
        "-m",
        "granian",
        "--interface=wsgi",
        "--no-ws",
        f"--host={where.host}",
        f"--port={port}",
        f"--workers={int(workers)}",
        # Explicit: granian's WSGI default is backlog / workers / 2 threads (256 per worker).
        f"--blocking-threads={int(threads)}",
        # A crashed worker is replaced; one that dies again within seconds (a refused start) stops the server.
        "--respawn-failed-workers",
        f"--log-level={settings.LOG_LEVEL.lower()}",  # granian's own lines; requests log through the middleware
        f"--working-dir={settings.BASE_DIR}",
        WSGI_ENTRY,
    )


class Command(BaseCommand):
    help = "Run this process's topology (RUN_MODE=startup) or migrate and seed it (RUN_MODE=migrate)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--gateway", action="store_true", help="all-in-one only: also run the nginx gateway (scripts/run does)")
        parser.add_argument("--roles", help=f"comma-separated subset of {', '.join(ROLES)} (default: SERVE_ROLES, else the topology's)")
        parser.add_argument("--role", choices=["ws"], help="internal: run the ASGI server in this process (the supervisor's ws program)")

    def handle(self, *args, gateway: bool, roles: str | None, role: str | None, **options):
        run_mode = settings.RUN_MODE
        if run_mode == "migrate":
            call_command("migrate", interactive=False, verbosity=options["verbosity"])
            call_command("seed", verbosity=options["verbosity"])
            call_command("create_topics", verbosity=options["verbosity"])
            return
        if run_mode != "startup":
            raise CommandError(f"RUN_MODE must be 'startup' or 'migrate', got {run_mode!r}")
        all_in_one = is_all_in_one()
        where = addresses(all_in_one=all_in_one)
        if role == "ws":
            self.run_asgi(where)
            return
        programs = self.plan(where, all_in_one=all_in_one, roles=roles, gateway=gateway)
        status = Supervisor(programs, stop_timeout=env.float("SERVE_STOP_TIMEOUT", default=15.0)).run()
        if status:
            sys.exit(status)

    def plan(self, where: Addresses, *, all_in_one: bool, roles: str | None, gateway: bool) -> list[Program]:
        services = active_services()
        selected = (roles or env.str("SERVE_ROLES", default="")).strip()
        if selected:
            wanted = [name.strip() for name in selected.split(",") if name.strip()]
            unknown = sorted(set(wanted) - set(ROLES))
            if unknown:
                raise CommandError(f"unknown role(s) {', '.join(unknown)}; known: {', '.join(ROLES)}")
        else:
            wanted = default_roles(services, all_in_one=all_in_one, commands=set(get_commands()))
        if gateway and "gateway" not in wanted:
            wanted.append("gateway")
        if "gateway" in wanted and not all_in_one:
            raise CommandError("the local gateway runs only in all-in-one mode; split mode sits behind deploy/nginx/split.conf")
        if "internal" in wanted and not all_in_one:
            raise CommandError("the internal listener runs only in all-in-one mode; split services call each other's own servers")
        for command in ("consume", "cdc"):
            if command in wanted and command not in get_commands():
                raise CommandError(f"role {command} needs `manage.py {command}`, which this codebase does not have yet")

        if "gateway" in wanted:
            ensure_ports_free(where.gateway_host, {"gateway": where.gateway_port})
        ports = {"web": where.wsgi_port, "internal": where.internal_port, "ws": where.asgi_port}
        ensure_ports_free(where.host, {role: port for role, port in ports.items() if role in wanted})

        python, manage = sys.executable, str(Path(settings.BASE_DIR) / "manage.py")
        celery = (python, "-m", "celery", "-A", "merchant_platform")
        node = "platform" if all_in_one else services[0].name
        web_env, others_env = self.worker_id_environments(worker_id_variable(services, all_in_one=all_in_one))

        programs = []
        if "web" in wanted:
            programs.append(Program("web", wsgi_server_argv(where, web_env), SERVER))
        if "internal" in wanted:
            # Its workers lease snowflake ids of their own: a configured id names the `web` process.
            programs.append(Program("internal", wsgi_server_argv(where, {}, internal=True), SERVER, others_env))
        if "ws" in wanted:
            programs.append(Program("ws", (python, manage, "serve", "--role", "ws"), SERVER, others_env))
        if "worker" in wanted:
            concurrency = str(env.int("CELERY_CONCURRENCY", default=2))
            pool = env.str("CELERY_POOL", default="prefork")  # threads: many I/O-bound tasks in flight per process
            worker = (*celery, "worker", "--loglevel", "INFO", "--hostname", f"{node}@%h", "--pool", pool, "--concurrency", concurrency)
            programs.append(Program("worker", worker, BACKGROUND, others_env))  # its queues: merchant_platform/celery.py
        if "beat" in wanted:
            programs.append(Program("beat", (*celery, "beat", "--loglevel", "INFO"), BACKGROUND, others_env))
        for command in ("consume", "cdc"):
            if command in wanted:
                programs.append(Program(command, (python, manage, command), BACKGROUND, others_env))
        if "gateway" in wanted:
            config = render_gateway_config(
                directory=Path(settings.BASE_DIR) / "var" / "gateway" / str(where.gateway_port),
                listen=f"{where.gateway_host}:{where.gateway_port}",
                wsgi=f"{where.host}:{where.wsgi_port}",
                asgi=f"{where.host}:{where.asgi_port}",
            )
            programs.append(Program("gateway", gateway_argv(config), SERVER))
        return programs

    def worker_id_environments(self, id_variable: str) -> tuple[dict, dict]:
        """A configured snowflake worker id names one process: the WSGI server gets it and runs one
        worker with more threads; every other program leases a free id of its own (spec 1.2.3): the
        variable set but empty, so neither the settings (payment's PAYMENT_WORKER_NUMBER) nor the
        lease hand it the configured or the default id again."""
        configured = os.environ.get(id_variable, "").strip()
        if not configured:
            return {}, {}
        concurrency = os.environ.get("WEB_CONCURRENCY", "").strip()
        if concurrency and concurrency != "1":
            raise CommandError(
                f"{id_variable}={configured} names one process, but WEB_CONCURRENCY={concurrency} would start "
                f"{concurrency} WSGI workers with it; unset one of them"
            )
        # 4 threads: granian warns above 2 x cores + 1 threads per worker, the GIL runs one at a time.
        web_env = {"WEB_CONCURRENCY": "1", "WEB_THREADS": os.environ.get("WEB_THREADS") or "4"}
        return web_env, {id_variable: ""}

    def run_asgi(self, where: Addresses) -> None:
        import uvicorn

        from merchant_platform.lifecycle import process_start

        process_start("ws")
        uvicorn.run(
            "merchant_platform.asgi:application",
            host=where.host,
            port=where.asgi_port,
            workers=1,  # one process, one leased worker id (uvicorn would read WEB_CONCURRENCY otherwise)
            ws=env.str("ASGI_WS_PROTOCOL", default="websockets-sansio"),
            lifespan="on",  # shutdown releases the snowflake lease: uvicorn's exit skips atexit
            log_config=None,
            access_log=False,
            proxy_headers=True,
            forwarded_allow_ips=env.str("FORWARDED_ALLOW_IPS", default="127.0.0.1,::1"),
        )
