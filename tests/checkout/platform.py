"""The whole platform as processes, for the checkout scenario (and `scripts/bench checkout`): a
scratch database migrated and seeded by `serve` (RUN_MODE=migrate), topics and consumer groups of its
own on the shared broker (KAFKA_TOPIC_PREFIX, KAFKA_CONSUMER_GROUP_SUFFIX; each group's offsets
committed at the start, so taxation's `latest` consumer misses nothing), a CDC slot of its own;
then `manage.py serve --gateway` (web, ws, Celery worker and beat, the CDC relay, nginx) and
`manage.py consume` (every Kafka consumer and the outbox relay) in a process of its own, which a
test may SIGKILL and start again as an orchestrator would.

A seller is an account signed up over HTTP and given OWNER everywhere with `manage.py grant_role`
(the operator's bootstrap step, docs/services/identity.md)."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import requests
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.support.ports import answers, free_ports
from tests.support.processes import inherited_env
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
BROKER = "127.0.0.1:9092"


@dataclass
class Platform:
    base: str  # the gateway, http://127.0.0.1:<port>
    stream: str  # ws://127.0.0.1:<port>/stream
    database_url: str
    env: dict[str, str]
    log_dir: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # split topology: service (or payment-worker-0) -> its WSGI port
    _logs: list = field(default_factory=list)

    # --- processes --------------------------------------------------------------------------------

    def start(self, name: str, argv: list[str], **env: str) -> subprocess.Popen:
        log = (self.log_dir / f"{name}-{len(self._logs)}.log").open("wb")
        self._logs.append(log)
        process = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = process
        return process

    def manage(self, *args: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed: {result.stderr[-3000:]}")
        return result

    def start_consumers(self) -> subprocess.Popen:
        return self.start("consume", [sys.executable, "manage.py", "consume"])

    def kill_consumers(self) -> None:
        """SIGKILL `manage.py consume` (every consumer thread and the outbox relay die mid-work)."""
        process = self.processes.pop("consume")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def output(self, name: str, *, tail: int | None = 4000) -> str:
        """What the process `name` wrote (each start's last `tail` characters; all with None)."""
        paths = sorted(self.log_dir.glob(f"{name}-[0-9]*.log"))  # not payment-worker-0's for payment
        return "\n".join(path.read_text(errors="replace")[-tail if tail else 0 :] for path in paths)

    def check_running(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}:\n{self.output(name)}")

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):  # then killed with its group below
                process.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes.clear()
        for log in self._logs:
            log.close()

    # --- the database, for fault injection only ---------------------------------------------------

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.database_url)


def _admin_url(database_url: str) -> str:
    parts = urlsplit(database_url)
    return parts._replace(path="/postgres").geturl()


def _commit_group_offsets_at_end(groups: dict[str, set[str]]) -> None:
    """Give each new consumer group a committed offset at the end of its topics: the platform then
    reads only what is published from now on, whatever earlier runs left on the shared broker."""
    for group, topic_names in groups.items():
        consumer = KafkaConsumer(bootstrap_servers=BROKER, group_id=group, enable_auto_commit=False)
        try:
            partitions = [TopicPartition(topic, p) for topic in topic_names for p in (consumer.partitions_for_topic(topic) or ())]
            ends = consumer.end_offsets(partitions)
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in ends.items()})
        finally:
            consumer.close()


def _registered_groups(platform: Platform) -> dict[str, set[str]]:
    groups: dict[str, set[str]] = {}
    for line in platform.manage("consume", "--list").stdout.splitlines():
        _, group, topics, _ = line.split("\t")
        groups.setdefault(group.removeprefix("group="), set()).update(topics.removeprefix("topics=").split(","))
    return groups


# The first scratch platform of a process migrates and seeds its database with `serve`
# (RUN_MODE=migrate) and keeps a copy of it; the later ones start from that copy (CREATE DATABASE
# ... TEMPLATE: seconds, where the migrations take one to two minutes on this machine) and only
# create their topics. Migrations and seeds write nothing but the database.
_templates: dict[str, str] = {}  # the server's admin URL -> the copy


def _keep_template(admin: str, database: str) -> None:
    template = f"{database}_template"
    try:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{template}" TEMPLATE "{database}"')
    except psycopg.errors.ObjectInUse:
        return  # a session (autovacuum) was in it: the next platform migrates its own
    _templates[admin] = template
    atexit.register(_drop_database, admin, template)


def _drop_database(admin: str, database: str) -> None:
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@contextlib.contextmanager
def scratch_platform(*, gateway: int, **variables: str):
    """Yield a Platform with no process running yet, reached at 127.0.0.1:`gateway`: its database
    migrated and seeded (or a copy of one, `_templates`), its topics made and its consumer groups committed at their end;
    `variables` add to (or replace) its processes' environment. Everything it made (processes,
    slot, database, topics, groups) is removed afterwards but the processes' output, kept in
    var/checkout/<tag>/."""
    tag = uuid.uuid4().hex[:10]
    log_dir = ROOT / "var" / "checkout" / tag
    log_dir.mkdir(parents=True)
    source = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    database = f"mp_checkout_{tag}"
    database_url = urlsplit(source)._replace(path=f"/{database}").geturl()
    base = f"http://127.0.0.1:{gateway}"
    env = inherited_env(
        DJANGO_SETTINGS_MODULE="settings",
        PYTHONUNBUFFERED="1",
        DATABASE_URL=database_url,
        KAFKA_CONSUMER_GROUP_SUFFIX=f"-checkout-{tag}-{{consumer}}",  # a group per consumer: docs/events.md
        KAFKA_TOPIC_PREFIX=f"checkout-{tag}.",
        CDC_SLOT_NAME=f"mp_cdc_checkout_{tag}",
        CACHE_KEY_PREFIX=f"checkout-{tag}",
    )
    # The provider calls in from outside, through the gateway.
    env.update({"PAYMENT_IPN_BASE_URL": base, "PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS": "true", **variables})
    platform = Platform(base=base, stream=f"ws://127.0.0.1:{gateway}/stream", database_url=database_url, env=env, log_dir=log_dir)
    admin = _admin_url(source)
    template = _templates.get(admin)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{database}"' + (f' TEMPLATE "{template}"' if template else ""))
    migrated = False
    try:
        if template:
            platform.manage("create_topics", timeout=120)
        else:
            platform.manage("serve", RUN_MODE="migrate", timeout=300)
            _keep_template(admin, database)
        migrated = True
        groups = _registered_groups(platform)
        _commit_group_offsets_at_end(groups)
        yield platform
    finally:
        platform.stop()
        if migrated:
            with contextlib.suppress(AssertionError):
                platform.manage("cdc", "--drop-slot", timeout=60)
        _drop_database(admin, database)
        if migrated:
            _delete_groups_and_topics(list(groups), prefix=env["KAFKA_TOPIC_PREFIX"])


@contextlib.contextmanager
def running_platform(
    *,
    ports: range,
    web_concurrency: int = 2,
    roles: str = "web,internal,ws,worker,beat,cdc,gateway",
    consumers: bool = True,
    **overrides: str,
):
    """Yield the all-in-one platform started (scratch_platform): `serve --gateway` with `roles`
    (without `cdc` the change streams do not flow) and, unless `consumers=False`, `consume`."""
    wanted = set(roles.split(","))
    gateway, wsgi, internal, asgi = free_ports(4, within=ports)
    base = f"http://127.0.0.1:{gateway}"
    variables = dict(
        GATEWAY_PORT=str(gateway),
        WSGI_PORT=str(wsgi),
        INTERNAL_WSGI_PORT=str(internal),  # the services' calls to each other (SERVICE_BASE_URL)
        ASGI_PORT=str(asgi),
        WEB_CONCURRENCY=str(web_concurrency),
        IDENTITY_JWKS_URL=f"{base}/jw-certs",
    )
    with scratch_platform(gateway=gateway, **{**variables, **overrides}) as platform:
        serve = platform.start("serve", [sys.executable, "manage.py", "serve", "--gateway", "--roles", roles])
        consume = platform.start_consumers() if consumers else serve
        listening = {"web": wsgi, "internal": internal, "ws": asgi, "gateway": gateway}
        for port in (port for role, port in listening.items() if role in wanted):
            wait_for(lambda port=port: answers(port) or serve.poll() is not None, timeout=90, message=f"port {port}")
            platform.check_running()
        wait_for(lambda: _healthy(base) or consume.poll() is not None, timeout=60, message="the gateway's /healthz")
        if "cdc" in wanted:
            wait_for_cdc(platform)
        yield platform


# What each service's `serve` runs in the split topology: the roles the checkout scenario needs of
# it. serve's defaults would add a Celery worker and beat to six services and a consume and cdc
# process to each (most exit at once), twice the processes on this 2-core machine.
SPLIT_ROLES = {
    "identity": "web",  # sign-up and the key set
    "commerce": "web,cdc",  # the MERCHANT, PRODUCT and PRODUCT_VARIANT change streams
    "finance": "web,consume",  # accounts from MERCHANT; SALE and COGS vouchers
    "inventory": "web,consume",  # location and items from the streams, payment.success, its outbox
    "ledger": "web,consume,worker",  # the ledger.generate bridge and the generation task
    "taxation": "web,consume",  # tax sets from PRODUCT
    "signal": "web,ws",  # /stream
    "payment": "web,consume",  # mode API (below): the IPN and its outbox (payment.success)
    "licensing": "web",
    "outreach": "web",
}
# Containers of deploy/compose.yaml besides the services' own, as (service, roles): payment's WORKER
# number 0, whose Celery worker sends the webhook to commerce and whose web server (the probes, no
# routes, not behind the gateway) holds worker id 91. Each of payment's processes runs in the mode
# compose gives its container (production refuses FULL; the test's processes run with
# APP_ENV=development, so that refusal is tests/payment/test_modes.py's).
SPLIT_WORKERS = {"payment-worker-0": ("payment", "web,worker,consume")}
PAYMENT_MODE_VARIABLES = ("PAYMENT_MODE", "PAYMENT_WORKER_NUMBER")


@contextlib.contextmanager
def running_split_platform(*, ports: range):
    """Yield the split topology started (scratch_platform): `APP_SERVICE=<service> manage.py serve`
    per service, each on a port of its own (signal's WebSocket server on another), behind nginx
    running deploy/nginx/split.conf with its upstreams pointed at those ports. Services call each
    other on their own ports, with the URLs deploy/compose.yaml gives them (hosts rewritten); only
    the provider's IPN comes in through the gateway. The gateway's access log is var/checkout/<tag>/gateway/access.log."""
    from tests.support.deploy import compose_container_variables, compose_service_urls, nginx_argv, render_split_config, split_upstreams

    gateway, stream, *rest = free_ports(2 + len(SPLIT_ROLES) + len(SPLIT_WORKERS), within=ports)
    port_of = dict(zip([*SPLIT_ROLES, *SPLIT_WORKERS], rest, strict=True))
    assert {host for host, _ in split_upstreams()} == set(SPLIT_ROLES), "split.conf's upstreams are not the ten services"

    variables = dict(
        SERVE_HOST="127.0.0.1",
        WEB_CONCURRENCY="1",
        CELERY_CONCURRENCY="1",
        # compose.yaml's service-to-service URLs (IDENTITY_JWKS_URL, COMMERCE_INVENTORY_URL, ...).
        **compose_service_urls(lambda host, port: f"127.0.0.1:{port_of[host]}"),
    )
    with scratch_platform(gateway=gateway, **variables) as platform:
        platform.ports.update(port_of)
        for service, roles in SPLIT_ROLES.items():
            platform.start(
                service,
                [sys.executable, "manage.py", "serve", "--roles", roles],
                APP_SERVICE=service,
                WSGI_PORT=str(port_of[service]),
                ASGI_PORT=str(stream),
                **compose_container_variables(service, *PAYMENT_MODE_VARIABLES),
            )
        for container, (service, roles) in SPLIT_WORKERS.items():
            platform.start(
                container,
                [sys.executable, "manage.py", "serve", "--roles", roles],
                APP_SERVICE=service,
                WSGI_PORT=str(port_of[container]),
                **compose_container_variables(container, *PAYMENT_MODE_VARIABLES),
            )
        (platform.log_dir / "gateway").mkdir()
        config = render_split_config(
            platform.log_dir / "gateway",
            listen_port=gateway,
            address=lambda host, port: f"127.0.0.1:{stream if port == 3001 else port_of[host]}",
            access_log=True,
        )
        platform.start("gateway", nginx_argv(config))
        for port in (gateway, stream, *rest):
            wait_for(lambda port=port: answers(port) or platform.check_running(), timeout=120, message=f"port {port}")
        for service in SPLIT_ROLES:
            prefix = f"/v1/api/{service}"
            wait_for(lambda prefix=prefix: _healthy(platform.base + prefix), timeout=60, message=f"{prefix}/healthz through the gateway")
        wait_for_cdc(platform)
        yield platform


def wait_for_cdc(platform: Platform) -> None:
    # Creating a logical slot waits for every transaction open in the cluster to end (other
    # databases' too): the change streams flow once the slot exists and its snapshot is done.
    wait_for(lambda: _cdc_ready(platform, platform.env["CDC_SLOT_NAME"]), timeout=240, message="the CDC relay's slot", interval=0.5)
    platform.check_running()


def _cdc_ready(platform: Platform, slot: str) -> bool:
    platform.check_running()
    with platform.connect() as connection:
        names = {row[0] for row in connection.execute("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s", [f"{slot}%"])}
    return names == {slot}


def _healthy(base: str) -> bool:
    """`base`/healthz answers 200 (the all-in-one root, or a service's prefix)."""
    with contextlib.suppress(requests.RequestException):
        return requests.get(f"{base}/healthz", timeout=5).status_code == 200
    return False


def _delete_groups_and_topics(groups: list[str], *, prefix: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=BROKER)
    try:
        admin.delete_topics([topic for topic in admin.list_topics() if topic.startswith(prefix)])
        with contextlib.suppress(Exception):  # a broker without group deletion keeps them: harmless
            admin.delete_consumer_groups(groups)
    finally:
        admin.close()


# --- a seller and its HTTP session -----------------------------------------------------------------


class Api:
    """A JSON client of the gateway with the seller's token; `call` asserts the status."""

    def __init__(self, base: str, token: str):
        self.base = base
        self.token = token
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.request_ids: dict[str, str] = {}  # "METHOD path" -> the X-Request-Id of its last answer

    def call(self, method: str, path: str, *, expect: int | tuple = 200, **kwargs):
        response = self.session.request(method, self.base + path, timeout=30, **kwargs)
        self.request_ids[f"{method} {path}"] = response.headers.get("X-Request-Id", "")
        expected = expect if isinstance(expect, tuple) else (expect,)
        assert response.status_code in expected, (method, path, response.status_code, response.text[:2000])
        return response

    def get(self, path: str, **params) -> dict:
        return self.call("GET", path, params=params).json()

    def post(self, path: str, body: dict | None = None, *, expect: int | tuple = (200, 201), **kwargs) -> dict:
        return self.call("POST", path, json=body or {}, expect=expect, **kwargs).json()


def new_seller(platform: Platform) -> Api:
    username = f"seller{secrets.token_hex(5)}"
    password = secrets.token_urlsafe(18)
    response = requests.post(f"{platform.base}/v1/api/identity/auth/sign-up", json={"username": username, "password": password}, timeout=30)
    assert response.status_code == 201, response.text
    platform.manage("grant_role", username, "OWNER")
    return Api(platform.base, response.json()["accessToken"])
