"""Target `soak` (issue 21 item 5): the whole platform as processes (tests/checkout/platform.py, as
`scripts/bench checkout` starts it) under a mixed workload for a bounded time, then what it cost.

One merchant is set up as the checkout scenario does (tests/checkout/test_scenario.py `open_shop`),
then, all at once and each in a closed loop:
- SOAK_PLACERS (4) clients: create a one-unit QR sale order, place it (taxation, inventory and payment
  called over HTTP through the gateway), and pay it at the fake provider, which sends the signed IPN
  (its signing rule, retried as the provider retries) and is timed until acknowledged;
- SOAK_READERS (4) clients: in turn a recent sale order, the merchant's products, the item's stock;
- SOAK_WS_CLIENTS (20) sockets on signal's /stream subscribed to the merchant's commerce room,
  collecting every `order.paid` message, plus one client connecting, subscribing and closing again
  in a loop (the handshake route).

The first `--warmup` seconds (10 by default for this target) are load that is not measured; then the
platform's processes' resident memory is read (RSS, every descendant of `serve` and `consume`), the
load runs `--duration` seconds (60 by default) while the routes are measured, and the RSS is read
again. Reported: per route, completed requests per second, p50/p99 and the share that failed (a
status other than the expected one, or no answer); the platform's CPU per request; whether every
acknowledged IPN ended PAID in commerce and reached every socket as `order.paid` (waited for after
the load, bounded); the load generator's longest pause (PauseWatch); and per process the RSS at the
start and the end of the measured window.

The bound: after the warm-up no process may grow by more than RSS_BOUND_MIB (32 MiB) plus
RSS_BOUND_SHARE (10%) of its own start RSS, and none may exit; otherwise the bench says which and
exits non-zero. Python processes keep allocator arenas and caches once touched, so the warm-up takes
the first requests' one-off growth (imports, pools, compiled templates) out of the comparison; a leak
of a few KiB per request still crosses the bound in a run of a few minutes (`--duration 300`).

The web server runs SOAK_WEB_THREADS threads per worker, `serve`'s default 2 unless set: a placing's
calls to taxation, inventory and payment go to the internal listener (docs/operations.md, "Calls
between services"), so concurrent placings queue instead of starving the public server. With `--nice N`
every platform process's session runs at N too (they are sessions of their own, so the bench's own
priority does not reach them).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import requests

from benchmarks.framework import PORT_RANGES, BenchmarkError, Context, CpuMeter, percentile, set_session_priority

PLACERS = int(os.environ.get("SOAK_PLACERS", "4"))
READERS = int(os.environ.get("SOAK_READERS", "4"))
WS_CLIENTS = int(os.environ.get("SOAK_WS_CLIENTS", "20"))
WEB_THREADS = os.environ.get("SOAK_WEB_THREADS", "2")
DEFAULT_DURATION = 60.0
DEFAULT_WARMUP = 10.0
RSS_BOUND_MIB = 32
RSS_BOUND_SHARE = 0.10
PORTS = PORT_RANGES["soak"]  # tests/bench/test_soak.py runs the target on 19450-19499
STOCK = 10_000_000
SETTLE_SECONDS = 60.0
RECENT_ORDERS = 64
HTTP_TIMEOUT = 30.0
PAGE_SIZE = 20
FAILURE_PAUSE = 0.1  # seconds a client waits after a failed call, so a failing route is not a busy loop
PAUSE_TICK = 0.1  # seconds between the pause watch's wake-ups
PAUSE_ROW = "load generator's longest pause (measured window and settling)"


# ------------------------------------------------------------------ per-route figures


@dataclass
class RouteFigures:
    latencies_ms: list[float] = field(default_factory=list)
    failures: int = 0
    samples: list[str] = field(default_factory=list)  # the first few failures, for the report


class Routes:
    """Latencies and failures per route, counted only while the window is open (thread-safe)."""

    def __init__(self):
        self.figures: dict[str, RouteFigures] = {}
        self.measuring = False
        self._lock = threading.Lock()

    def add(self, route: str, started: float, failure: str | None = None) -> None:
        elapsed_ms = (time.monotonic() - started) * 1000
        if not self.measuring:
            return
        with self._lock:
            figures = self.figures.setdefault(route, RouteFigures())
            if failure is None:
                figures.latencies_ms.append(elapsed_ms)
                return
            figures.failures += 1
            if len(figures.samples) < 3:
                figures.samples.append(failure[:300])

    def results(self, window: float) -> list[dict]:
        rows = []
        for route, figures in sorted(self.figures.items()):
            done = len(figures.latencies_ms)
            total = done + figures.failures
            rows.append(
                {
                    "name": route,
                    "requests": total,
                    "rate": round(done / window, 1),
                    "unit": "req/s",
                    "p50_ms": round(percentile(figures.latencies_ms, 50), 1) if done else None,
                    "p99_ms": round(percentile(figures.latencies_ms, 99), 1) if done else None,
                    "errors": figures.failures,
                    "error_pct": round(100 * figures.failures / total, 2) if total else 0.0,
                    **({"failures": figures.samples} if figures.samples else {}),
                }
            )
        return rows


class Client:
    """One HTTP session of the seller; every call is timed under its route's name."""

    def __init__(self, base: str, token: str, routes: Routes):
        self.base = base
        self.routes = routes
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def call(self, route: str, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs) -> dict | None:
        started = time.monotonic()
        try:
            response = self.session.request(method, self.base + path, timeout=HTTP_TIMEOUT, **kwargs)
        except requests.RequestException as exc:
            self.routes.add(route, started, f"{type(exc).__name__}: {exc}")
            return None
        if response.status_code not in expect:
            self.routes.add(route, started, f"{response.status_code} {response.text[:200]}")
            return None
        self.routes.add(route, started)
        return response.json()


class PauseWatch:
    """The load generator's longest pause: a thread wakes every PAUSE_TICK and notes how late it
    woke. A machine that froze (a paused VM) or a process that did not run (a thread holding the GIL)
    shows as a pause; the fake provider answers from this process, so a pause longer than the
    platform's timeouts towards it fails calls that a running provider would have answered."""

    def __init__(self):
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        woke = time.monotonic()
        while not self._stop.wait(PAUSE_TICK):
            now = time.monotonic()
            self.longest = max(self.longest, now - woke - PAUSE_TICK)
            woke = now

    def result(self) -> dict:
        return {"name": PAUSE_ROW, "value": round(self.longest, 2), "unit": "s"}


# ------------------------------------------------------------------ resident memory


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    label: str
    rss_kib: int


# What a platform process is, from its command line (first match): the roles of `manage.py serve`.
ROLE_LABELS = (
    ("serve --role ws", "ws (uvicorn)"),
    ("manage.py serve", "serve (supervisor)"),
    ("manage.py consume", "consume"),
    ("manage.py cdc", "cdc"),
    ("granian", "web (granian)"),
    ("celery -A merchant_platform beat", "beat (celery)"),
    ("celery -A merchant_platform worker", "worker (celery)"),
    ("nginx: worker", "gateway (nginx worker)"),
    ("nginx", "gateway (nginx)"),
)


def _processes() -> dict[int, int]:
    """Every live process and its parent, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def _label(pid: int) -> str:
    text = " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0"))
    return next((label for needle, label in ROLE_LABELS if needle in text), text[:40])


def rss_snapshot(roots: set[int]) -> dict[int, ProcessInfo]:
    """The resident memory of every process under `roots` (the roots included); a child of a
    process of the same role is its worker (granian's and Celery's pools) and says so."""
    parents = _processes()
    snapshot: dict[int, ProcessInfo] = {}
    frontier = sorted(pid for pid in roots if pid in parents)
    while frontier:
        pid = frontier.pop(0)
        frontier += sorted(child for child, parent in parents.items() if parent == pid)
        with contextlib.suppress(OSError, StopIteration):  # a process that ended meanwhile is left out
            with open(f"/proc/{pid}/status") as status:
                rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
            label = _label(pid)
            parent = snapshot.get(parents[pid])
            if parent is not None and parent.label.split(" ", 1)[0] == label.split(" ", 1)[0] and "nginx" not in label:
                label = f"{label} child"
            snapshot[pid] = ProcessInfo(pid, label, rss)
    return snapshot


def rss_results(idle: dict[int, ProcessInfo], start: dict[int, ProcessInfo], end: dict[int, ProcessInfo]) -> list[dict]:
    """One row per process: RSS before any load (idle), after the warm-up (start) and at the end,
    the growth from start to end against the bound; a process present at the start and gone at
    the end fails, one that appeared is shown."""
    rows = []
    for pid in sorted(start.keys() | end.keys(), key=lambda pid: (idle.get(pid) is None, pid)):
        before, after = start.get(pid), end.get(pid)
        row = {"name": f"RSS {(after or before).label} [{pid}]"}
        if pid in idle:
            row["rss_idle_mib"] = round(idle[pid].rss_kib / 1024, 1)
        if before is not None:
            row["rss_start_mib"] = round(before.rss_kib / 1024, 1)
        if after is not None:
            row["rss_end_mib"] = round(after.rss_kib / 1024, 1)
        if before is not None and after is not None:
            growth = (after.rss_kib - before.rss_kib) / 1024
            bound = RSS_BOUND_MIB + RSS_BOUND_SHARE * before.rss_kib / 1024
            row.update(growth_mib=round(growth, 1), bound_mib=round(bound, 1), passed=growth <= bound)
        elif before is not None:
            row.update(value="exited during the soak", passed=False)
        else:
            row.update(value="started during the soak", passed=True)
        rows.append(row)
    return rows


# ------------------------------------------------------------------ the load


class Soak:
    def __init__(self, platform, api, shop, provider, routes: Routes):
        self.platform, self.api, self.shop, self.provider, self.routes = platform, api, shop, provider, routes
        self.stop = threading.Event()
        self.recent: deque[str] = deque(maxlen=RECENT_ORDERS)  # sale orders the readers fetch
        self.paid: list[str] = []  # orders whose IPN was acknowledged (meant to end PAID everywhere)
        self.ipn_retries = 0
        self.listeners: list = []
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def client(self) -> Client:
        return Client(self.platform.base, self.api.token, self.routes)

    def place_and_pay(self) -> None:
        from tests.checkout.test_scenario import COMMERCE

        client = self.client()
        body = {
            "merchantId": self.shop.merchant_id,
            "lines": [{"variantId": self.shop.variant_id, "quantity": 1}],
            "paymentChannel": "QR",
            "financeAccountId": self.shop.cash_account_id,
        }
        while not self.stop.is_set():
            order = client.call("POST /commerce/sale-orders", "POST", f"{COMMERCE}/sale-orders", json=body, expect=(201,))
            if order is None:
                time.sleep(FAILURE_PAUSE)
                continue
            self.recent.append(order["id"])
            placed = client.call(
                "POST /commerce/sale-orders/{id}/actions/place", "POST", f"{COMMERCE}/sale-orders/{order['id']}/actions/place"
            )
            if placed is None:
                time.sleep(FAILURE_PAUSE)
                continue
            self.pay(placed["id"], placed["payment"]["attempts"][0]["code"])

    def pay(self, order_id: str, code: str) -> None:
        """The customer pays: the provider signs and sends the IPN (retrying as it does) until
        payment acknowledges it; timed as one call, failed when it never was."""
        started = time.monotonic()
        self.provider.pay(code, wait=True)
        replies = self.provider.payments[code].ipn_replies
        if replies[-1][1] in ("00", "02"):
            self.routes.add("IPN (fake provider, signed, until acknowledged)", started)
            with self._lock:
                self.paid.append(order_id)
                self.ipn_retries += len(replies) - 1
        else:
            self.routes.add("IPN (fake provider, signed, until acknowledged)", started, f"replies {replies}")

    def read(self) -> None:
        from tests.checkout.test_scenario import COMMERCE, INVENTORY

        client = self.client()
        turn = 0
        while not self.stop.is_set():
            turn += 1
            if turn % 3 == 0 and self.recent:
                client.call("GET /commerce/sale-orders/{id}", "GET", f"{COMMERCE}/sale-orders/{self.recent[-1]}")
            elif turn % 3 == 1:
                params = {"merchantId": self.shop.merchant_id, "pageSize": PAGE_SIZE}
                client.call("GET /commerce/products", "GET", f"{COMMERCE}/products", params=params)
            else:
                client.call("GET /inventory/stock", "GET", f"{INVENTORY}/stock", params={"inventoryItemId": self.shop.item_id})

    def reconnect(self) -> None:
        """Handshake, subscribe and close in a loop: the socket route's throughput and latency."""
        from django.conf import settings

        from apps.signal.client import StreamClient

        room = self.room
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                with StreamClient(self.platform.stream, self.api.token, info=settings.APP_ENV_WEBSOCKET_ECDH_INFO, timeout=15) as client:
                    client.subscribe(room)
            except Exception as exc:  # any refusal or drop is the route's failure, counted and shown
                self.routes.add("WS /stream handshake + subscribe + close", started, f"{type(exc).__name__}: {exc}")
                time.sleep(FAILURE_PAUSE)
                continue
            self.routes.add("WS /stream handshake + subscribe + close", started)

    @property
    def room(self) -> str:
        return f"merchant.{self.shop.merchant_id}.commerce"

    def start(self) -> None:
        from tests.checkout.test_scenario import Listener

        self.listeners = [Listener(self.platform, self.api, self.room) for _ in range(WS_CLIENTS)]
        workers = [self.place_and_pay] * PLACERS + [self.read] * READERS + [self.reconnect]
        self.threads = [threading.Thread(target=self.keep_going, args=(work,), daemon=True) for work in workers]
        for thread in self.threads:
            thread.start()

    def keep_going(self, work) -> None:
        """Run a client's loop again when an answer it did not expect broke it (counted, shown)."""
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                work()
            except Exception as exc:  # an unexpected answer's shape: the client's failure, not the run's end
                self.routes.add(f"client {work.__name__} (unexpected answer)", started, f"{type(exc).__name__}: {exc}")
                time.sleep(FAILURE_PAUSE)

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=HTTP_TIMEOUT + 10)

    def settle(self) -> list[dict]:
        """After the load: every acknowledged IPN PAID in commerce, and its `order.paid` on every
        socket (bounded by SETTLE_SECONDS)."""
        from tests.checkout.test_scenario import COMMERCE

        expected = set(self.paid)
        deadline = time.monotonic() + SETTLE_SECONDS

        def unpaid() -> set[str]:
            return {order for order in expected if self.api.get(f"{COMMERCE}/sale-orders/{order}")["status"] != "PAID"}

        def undelivered() -> int:
            return sum(len(expected - {m["payload"]["orderId"] for m in listener.named("order.paid")}) for listener in self.listeners)

        pending = unpaid()
        while pending and time.monotonic() < deadline:
            time.sleep(1.0)
            pending = unpaid()
        while undelivered() and time.monotonic() < deadline:
            time.sleep(0.5)
        missing = undelivered()
        dropped = sum(not listener.thread.is_alive() for listener in self.listeners)
        for listener in self.listeners:
            listener.close()
        return [
            {
                "name": "orders acknowledged by IPN and PAID in commerce",
                "value": f"{len(expected) - len(pending)} of {len(expected)}",
                "errors": len(pending),
                "passed": not pending,
            },
            {
                "name": f"order.paid on every socket ({len(self.listeners)} sockets)",
                "value": f"{len(expected) * len(self.listeners) - missing} of {len(expected) * len(self.listeners)}",
                "errors": missing,
                "passed": not missing and not dropped,
                **({"failures": [f"{dropped} sockets closed"]} if dropped else {}),
            },
            {"name": "IPN retries by the provider", "value": self.ipn_retries},
        ]


def run(ctx: Context) -> list[dict]:
    ctx.django()
    from apps.payment.fake_provider import FakeProvider
    from tests.checkout.platform import new_seller, running_platform
    from tests.checkout.test_scenario import open_shop

    duration, warmup = ctx.duration, ctx.warmup
    token_ttl = str(max(900, int(warmup + duration + SETTLE_SECONDS + 300)))  # no token expires mid-run
    provider = FakeProvider(secret="soak-provider-secret-0123456789ab", retry_interval_seconds=0.5).start()
    try:
        with running_platform(ports=PORTS, WEB_THREADS=WEB_THREADS, IDENTITY_ACCESS_TOKEN_TTL_SECONDS=token_ttl) as platform:
            api = new_seller(platform)
            shop = open_shop(platform, api, provider, received=STOCK)
            ctx.say(
                f"  platform at {platform.base}; merchant {shop.merchant_id}; {PLACERS} placers, {READERS} readers, "
                f"{WS_CLIENTS} sockets + 1 reconnecting; 2 x {WEB_THREADS} WSGI threads; {warmup:g} s warm-up, {duration:g} s measured"
            )
            routes = Routes()
            soak = Soak(platform, api, shop, provider, routes)
            roots = {process.pid for process in platform.processes.values()}
            idle = rss_snapshot(roots)
            if ctx.nice is not None:  # each platform program runs in a session of its own: rank every one
                for pid in idle:
                    set_session_priority(pid, ctx.nice)
            ctx.wait_for_quiet_machine()
            pauses = PauseWatch()
            try:
                soak.start()
                try:
                    time.sleep(warmup)
                    platform.check_running()
                    start = rss_snapshot(roots)
                    meter = CpuMeter({os.getpgid(pid) for pid in start})
                    pauses.start()
                    routes.measuring = True
                    window_started = time.monotonic()
                    time.sleep(duration)
                    routes.measuring = False
                    window = time.monotonic() - window_started
                    end = rss_snapshot(roots)
                    cpu = meter.stop(sum(row["requests"] - row["errors"] for row in routes.results(window)))
                finally:
                    soak.finish()
                platform.check_running()
                results = [ctx.record(row.pop("name"), **row) for row in routes.results(window)]
                results.append(ctx.record("all routes (platform CPU per completed request)", **cpu))
                results += [ctx.record(row.pop("name"), **row) for row in soak.settle()]
            finally:
                pauses.stop()
            results.append(ctx.record(**pauses.result()))
            memory = [ctx.record(row.pop("name"), **row) for row in rss_results(idle, start, end)]
            results += memory
    except AssertionError as exc:  # the platform did not start or a process of it died: its output is in the message
        raise BenchmarkError(str(exc)) from exc
    finally:
        provider.stop()
    grown = [row for row in memory if not row.get("passed", True)]
    if grown:
        names = ", ".join(f"{row['name']} ({row.get('growth_mib', row.get('value'))})" for row in grown)
        raise BenchmarkError(
            f"{len(grown)} process(es) grew beyond the bound ({RSS_BOUND_MIB} MiB + {RSS_BOUND_SHARE:.0%} of the start RSS) "
            f"or exited: {names}"
        )
    return results
