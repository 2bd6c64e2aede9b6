"""Target `payment`: IPN confirmations and webhook deliveries per second (issue 16, performance).

(a) POST /api/pay/provider/qr-mms/ipn through the platform (ctx.platform: nginx gateway + the
    all-in-one WSGI server), 32 connections, each request a different attempt's signed IPN (JSON,
    prov_ResponseCode 00): the whole confirmation (attempt lookup, the merchant's sealed integration
    read and opened, HMAC-SHA512 check, amount and date checks, the transaction and attempt locked,
    302_SUCCESS, SETTLED, the events into the outbox, the merchant's room and the webhook handler);
(b) the bare view (benchmarks.payment_bare): the same signature check and one UPDATE, same server;
(c) (a) without the gateway, the figure to set against (b).
(f) (c) with OUTBOX_RELAY_AFTER_COMMIT=false on the server and the outbox relayed by
    `manage.py consume --service payment` (its CPU counted with the server's), then a check that
    the relay drained the outbox.
(e) the bare project's `/required` view: the whole required confirmation in raw SQL (9 statements,
    the sealed integration opened, the outbox rows written, the webhook configs read), not a target:
    the floor any implementation of the required work starts from on this machine, same run.
(g) (e) through the same nginx gateway as (a): the floor for (a) itself.
(h) (a)'s request for attempts that do not exist (answered 01 after the attempt read): what the
    platform's stack (gateway, middleware, the IPN view) and one ORM read cost before any
    confirmation work.
(d) webhook deliveries: PENDING deliveries of one webhook, each dispatched first as a state change's
    commit dispatches its deliveries (services.webhook_dispatch: a task is queued unless one is
    waiting to start), then sent by the platform's Celery worker (started as `manage.py serve`
    starts it, prefork x2; the real task, apps.payment.tasks.deliver_webhooks ->
    services.webhook_deliver_many: claim a batch, sign, POST concurrently, record) to a local
    receiver (benchmarks.payment_receiver under granian); the rate runs from the first delivery's
    recorded try to the last (the delivery log's `at`, so the worker's start is not counted),
    p50/p99 are the HTTP tries' latencyMs.
Targets: (a) at least 500 confirmations/s with p99 under 100 ms, every IPN answered 00 for an
attempt of its own; (d) at least 500 deliveries/s.

Each run empties payment's tables in the bench database, then writes the attempts (SENT, QR, one
per IPN sent, sized from --duration, --warmup and --repeat) with INSERT ... SELECT.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import time
from datetime import UTC, datetime

from benchmarks.framework import PLATFORM_SETTINGS, PLATFORM_WSGI, REPO_ROOT, BenchmarkError, Context, Request, ServerSpec

BENCH_MERCHANT = 9_990_000_016
WEBHOOK_MERCHANT = 9_990_000_017
SECRET = "bench-payment-provider-secret"
IPN_PATH = "/api/pay/provider/qr-mms/ipn"
CONNECTIONS = 32
AMOUNT = 100  # minor units; prov_Amount is AMOUNT x 100
# Attempts written per wrk run: enough for the fastest rate expected, so no IPN repeats an attempt;
# a check says when one did.
PLATFORM_MAX_RPS = 1_200
BARE_MAX_RPS = 3_500
DELIVERIES = 5_000
WARMUP_DELIVERIES = 300
MIN_IPN_RPS = 500
MAX_IPN_P99_MS = 100
MIN_DELIVERY_RATE = 500
RECEIVER = ServerSpec("granian", "wsgi", workers=1, threads=1)


def _signed(fields: dict) -> dict:
    message = "&".join(f"{name}={fields[name]}" for name in sorted(fields))
    return {**fields, "prov_SecureHash": hmac.new(SECRET.encode(), message.encode(), hashlib.sha512).hexdigest().upper()}


def prepare() -> None:
    """Empty payment's tables and give the bench merchant its QR integration (the sealed secret)."""
    from django.db import connections

    from apps.payment.models import OutboxMessage, PaymentAttempt, PaymentTransaction, WebhookConfig, WebhookDelivery
    from merchant_platform.integrations import seal_credential
    from merchant_platform.models import Configuration

    tables = [model._meta.db_table for model in (WebhookDelivery, WebhookConfig, PaymentAttempt, PaymentTransaction, OutboxMessage)]
    with connections["payment"].cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(f'payment.{table}' for table in tables)}")
    row, _created = Configuration.objects.get_or_create(
        group=Configuration.Group.INTEGRATION,
        principal_type=Configuration.PrincipalType.MERCHANT,
        principal_id=BENCH_MERCHANT,
        code="QR",
        environment=Configuration.Environment.SANDBOX,
        deleted_at=None,
        defaults={"settings": {"endpoint": "http://127.0.0.1:9"}},
    )
    row.credential, row.credential_mask = seal_credential(configuration_id=row.id, credential=SECRET)
    row.save(update_fields=["credential", "credential_mask"])


def write_attempts(prefix: str, first_id: int, count: int) -> list[str]:
    """`count` NEW transactions of AMOUNT, each with one SENT QR attempt; returns the codes."""
    from django.db import connections

    params = {"first": first_id, "count": count, "merchant": BENCH_MERCHANT, "prefix": prefix, "amount": AMOUNT}
    with connections["payment"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO payment.payment_transaction (id, created_at, updated_at, merchant_id, source_id, amount, paid_amount, "
            "currency, lines, description, status) SELECT %(first)s + n, now(), now(), %(merchant)s, %(prefix)s || n, %(amount)s, 0, "
            "'EUR', '[]', '', 'NEW' FROM generate_series(1, %(count)s) n",
            params,
        )
        cursor.execute(
            "INSERT INTO payment.payment_attempt (id, created_at, updated_at, merchant_id, channel, code, amount, status, "
            "provider_reference, qr_payload, bank_code, failure_reason, expires_at, sent_at, transaction_id) "
            "SELECT %(first)s + n, now(), now(), %(merchant)s, 'QR', %(prefix)s || n, %(amount)s, 'SENT', '', '', '', '', "
            "now() + interval '1 day', now(), %(first)s + n FROM generate_series(1, %(count)s) n",
            params,
        )
    return [f"{prefix}{n}" for n in range(1, count + 1)]


def ipn_requests(path: str, codes: list[str]) -> list[Request]:
    pay_date = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    headers = (("Content-Type", "application/json"),)
    return [
        Request(
            path,
            "POST",
            json.dumps(
                _signed(
                    {
                        "prov_TxnRef": code,
                        "prov_TransactionNo": str(14_000_000 + n),
                        "prov_Amount": str(AMOUNT * 100),
                        "prov_ResponseCode": "00",
                        "prov_BankCode": "NCB",
                        "prov_PayDate": pay_date,
                    }
                )
            ),
            headers,
        )
        for n, code in enumerate(codes)
    ]


def confirmed(prefix: str) -> int:
    from django.db import connections

    with connections["payment"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM payment.payment_attempt WHERE code LIKE %s AND status = '302_SUCCESS'", [prefix + "%"])
        return cursor.fetchone()[0]


def ipn_case(ctx: Context, name: str, url: str, *, path: str, prefix: str, first_id: int, max_rps: int, server: str) -> tuple[dict, dict]:
    """The warm-up and each repeat as a wrk run of its own, over attempts of its own: wrk starts its
    request list from the top at every run, so one list shared by the runs would repeat the IPNs of
    the warm-up (the cheap already-confirmed answer). Returns the median run and the check that no
    run came round to its first attempts again."""
    warmup, repeat = ctx.warmup, ctx.repeat
    ctx.warmup, ctx.repeat = 0, 1
    runs, wrapped = [], []
    try:
        for run in range(repeat + (1 if warmup > 0 else 0)):
            duration = warmup if warmup > 0 and run == 0 else ctx.duration
            count = int(duration * max_rps) + 10
            run_prefix = f"{prefix}{run}x"
            codes = write_attempts(run_prefix, first_id + run * 1_000_000, count)
            result = ctx.load(name, url, requests=ipn_requests(path, codes), connections=CONNECTIONS, duration=duration, server=server)
            if confirmed(run_prefix) >= count:
                wrapped.append(run)
            if warmup > 0 and run == 0:
                continue
            runs.append(result)
    finally:
        ctx.warmup, ctx.repeat = warmup, repeat
    ordered = sorted(runs, key=lambda run: run["rps"])
    result = dict(ordered[(len(ordered) - 1) // 2])
    if len(runs) > 1:
        result.update(rps_min=ordered[0]["rps"], rps_max=ordered[-1]["rps"], runs=len(runs))
        for failures in ("errors", "non_2xx"):
            result[failures] = sum(run[failures] for run in runs)
    check = ctx.record(f"check: {name[:3]} one attempt per IPN", value=f"runs wrapped: {len(wrapped)}", passed=not wrapped)
    return result, check


def outbox_pending_after(seconds: float) -> int:
    """Payment's outbox rows not yet sent, once they are all sent or after `seconds`."""
    from django.db import connections

    deadline = time.monotonic() + seconds
    while True:
        with connections["payment"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM payment.payment_outboxmessage WHERE sent_at IS NULL")
            pending = cursor.fetchone()[0]
        if pending == 0 or time.monotonic() > deadline:
            return pending
        time.sleep(0.5)


def deliveries_round(ctx: Context, webhook_id: int, first_id: int, count: int) -> dict:
    """Write `count` due deliveries and dispatch them, then start the platform's Celery worker and
    wait for it to send them all (dispatched first, so the producer does not pace the worker)."""
    from django.db import connections

    from apps.payment.services import webhook_dispatch

    payload = json.dumps(
        {
            "event": "attempt.success",
            "source": "payment",
            "timestamp": "2026-11-25T00:00:00.000Z",
            "transaction": {"id": "1", "merchantId": str(WEBHOOK_MERCHANT), "sourceId": "order-1", "amount": AMOUNT, "status": "SETTLED"},
            "attempt": {"id": "1", "code": "PA00", "channel": "QR", "amount": AMOUNT, "status": "302_SUCCESS", "bankCode": "NCB"},
        }
    )
    with connections["payment"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO payment.webhook_delivery (id, created_at, updated_at, merchant_id, message_id, event_type, payload, status, "
            "attempt_count, next_attempt_at, last_error, log, webhook_id) SELECT %(first)s + n, now(), now(), %(merchant)s, "
            "'msg_bench' || (%(first)s + n), 'attempt.success', %(payload)s::jsonb, 'PENDING', 0, now(), '', '[]', %(webhook)s "
            "FROM generate_series(1, %(count)s) n",
            {"first": first_id, "count": count, "merchant": WEBHOOK_MERCHANT, "payload": payload, "webhook": webhook_id},
        )
    for delivery_id in range(first_id + 1, first_id + count + 1):
        webhook_dispatch([delivery_id])
    query = (
        "SELECT count(*) FILTER (WHERE status = 'SUCCEEDED'), count(*) FILTER (WHERE status = 'SUCCEEDED' AND attempt_count = 1), "
        "min((log->0->>'at')::timestamptz), max((log->0->>'at')::timestamptz) FROM payment.webhook_delivery WHERE id > %s AND id <= %s"
    )
    worker = [sys.executable, "-m", "celery", "-A", "merchant_platform", "worker", "--loglevel", "WARNING"]
    worker += ["--hostname", "bench-payment@%h", "--concurrency", "2"]  # as `manage.py serve` runs it (CELERY_CONCURRENCY 2)
    with ctx.process("celery-worker", worker, ready=lambda: True, settings_module=PLATFORM_SETTINGS):
        deadline = time.monotonic() + 300
        while True:
            with connections["payment"].cursor() as cursor:
                cursor.execute(query, [first_id, first_id + count])
                succeeded, first_try, started, finished = cursor.fetchone()
            if succeeded == count or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    if succeeded != count:
        raise BenchmarkError(f"webhook deliveries: {succeeded} of {count} succeeded in 300 s")
    with connections["payment"].cursor() as cursor:
        cursor.execute(
            "SELECT (log->0->>'latencyMs')::int FROM payment.webhook_delivery WHERE id > %s AND id <= %s", [first_id, first_id + count]
        )
        latencies = [float(row[0]) for row in cursor.fetchall()]
    return {"seconds": (finished - started).total_seconds(), "first_try": first_try, "latencies": latencies}


def webhook_case(ctx: Context) -> tuple[dict, dict]:
    from django.db import connections

    from apps.payment import services

    with ctx.server(RECEIVER, "benchmarks.payment_receiver:application", ready_path="/") as receiver_url:
        config, _secret = services.webhook_create(
            merchant_id=WEBHOOK_MERCHANT, name="bench", url=receiver_url + "/hooks", event_types=["*"]
        )
        connections.close_all()
        deliveries_round(ctx, config.id, 9_300_000_000_000_000, WARMUP_DELIVERIES)
        rounds = [deliveries_round(ctx, config.id, 9_300_000_000_000_000 + (n + 1) * 1_000_000, DELIVERIES) for n in range(ctx.repeat)]
    rates = sorted((DELIVERIES - 1) / r["seconds"] for r in rounds)
    median = sorted(rounds, key=lambda r: (DELIVERIES - 1) / r["seconds"])[(len(rounds) - 1) // 2]
    extra = {"rate_min": round(rates[0], 1), "rate_max": round(rates[-1], 1)} if len(rounds) > 1 else {}
    result = ctx.rate(
        "(d) webhook deliveries, Celery worker -> local receiver",
        DELIVERIES - 1,
        median["seconds"],
        unit="deliveries/s",
        latencies_ms=median["latencies"],
        server=f"celery prefork x2 -> {RECEIVER.label}",
        **extra,
    )
    first_try = min(r["first_try"] for r in rounds)
    check = ctx.record("check: (d) every delivery succeeded at its first try", value=first_try, passed=first_try == DELIVERIES)
    return result, check


def run(ctx: Context) -> list[dict]:
    ctx.env["PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS"] = "true"  # the receiver listens on 127.0.0.1
    ctx.env["BENCH_PAYMENT_SECRET"] = SECRET
    ctx.django()
    from django.conf import settings

    ctx.env["BENCH_PAYMENT_APP_SECRET"] = settings.APP_ENV_APPLICATION_SECRET  # (e) opens the sealed integration
    prepare()
    results = []
    server = PLATFORM_WSGI.label
    with ctx.platform() as gateway_url:
        ipn, check = ipn_case(
            ctx,
            "(a) IPN confirmation, full stack + gateway",
            gateway_url,
            path=IPN_PATH,
            prefix="PBA",
            first_id=9_100_000_000_000_000,
            max_rps=PLATFORM_MAX_RPS,
            server=f"nginx + {server}",
        )
        results += [ipn, check]
        unknown = [f"PBH{n}" for n in range(1, 2_001)]
        results.append(
            ctx.load(
                "(h) (a) for attempts that do not exist: the stack and one read",
                gateway_url,
                requests=ipn_requests(IPN_PATH, unknown),
                connections=CONNECTIONS,
                server=f"nginx + {server}",
            )
        )
    with ctx.platform(gateway=False) as wsgi_url:
        direct, check = ipn_case(
            ctx,
            "(c) IPN confirmation, full stack",
            wsgi_url,
            path=IPN_PATH,
            prefix="PBC",
            first_id=9_200_000_000_000_000,
            max_rps=PLATFORM_MAX_RPS,
            server=server,
        )
        results += [direct, check]
    with ctx.platform(gateway=False, env={"OUTBOX_RELAY_AFTER_COMMIT": "false"}) as wsgi_url:
        relay = [sys.executable, str(REPO_ROOT / "manage.py"), "consume", "--service", "payment"]
        with ctx.process("outbox-relay", relay, ready=lambda: True):
            relayed, check = ipn_case(
                ctx,
                "(f) (c), the outbox relayed by manage.py consume",
                wsgi_url,
                path=IPN_PATH,
                prefix="PBF",
                first_id=9_500_000_000_000_000,
                max_rps=PLATFORM_MAX_RPS,
                server=f"{server} + consume",
            )
            pending = outbox_pending_after(30.0)
        results += [relayed, check]
        results.append(ctx.record("check: (f) the relay process drained the outbox", value=f"{pending} pending", passed=pending == 0))
    with ctx.server(PLATFORM_WSGI, "benchmarks.payment_bare:application", settings_module="benchmarks.payment_bare") as bare_url:
        bare, check = ipn_case(
            ctx,
            "(b) bare view: signature check + one UPDATE",
            bare_url,
            path="/ipn",
            prefix="PBB",
            first_id=9_000_000_000_000_000,
            max_rps=BARE_MAX_RPS,
            server=server,
        )
        results += [bare, check]
        required, check = ipn_case(
            ctx,
            "(e) bare view: the required work in raw SQL",
            bare_url,
            path="/required",
            prefix="PBE",
            first_id=9_400_000_000_000_000,
            max_rps=BARE_MAX_RPS,
            server=server,
        )
        results += [required, check]
        with ctx.gateway(bare_url) as gateway_url:
            required_gateway, check = ipn_case(
                ctx,
                "(g) (e) through the gateway",
                gateway_url,
                path="/required",
                prefix="PBG",
                first_id=9_600_000_000_000_000,
                max_rps=BARE_MAX_RPS,
                server=f"nginx + {server}",
            )
        results += [required_gateway, check]
    results += list(webhook_case(ctx))
    delivery = results[-2]

    failed = sum(result["errors"] + result["non_2xx"] for result in (ipn, direct, relayed, bare, required, required_gateway))
    results.append(ctx.record(f"check: (a) >= {MIN_IPN_RPS} confirmations/s", value=ipn["rps"], passed=ipn["rps"] >= MIN_IPN_RPS))
    results.append(ctx.record(f"check: (a) p99 < {MAX_IPN_P99_MS} ms", value=ipn["p99_ms"], passed=ipn["p99_ms"] < MAX_IPN_P99_MS))
    results.append(ctx.record("(c) as a share of (b)", value=f"{direct['rps'] / bare['rps']:.0%}"))
    results.append(ctx.record("(c) as a share of (e)", value=f"{direct['rps'] / required['rps']:.0%}"))
    results.append(ctx.record("(f) as a share of (e)", value=f"{relayed['rps'] / required['rps']:.0%}"))
    results.append(ctx.record("(a) as a share of (g)", value=f"{ipn['rps'] / required_gateway['rps']:.0%}"))
    results.append(ctx.record(f"check: no failed request at {CONNECTIONS} connections", value=failed, passed=failed == 0))
    results.append(
        ctx.record(
            f"check: (d) >= {MIN_DELIVERY_RATE} deliveries/s", value=round(delivery["rate"]), passed=delivery["rate"] >= MIN_DELIVERY_RATE
        )
    )
    return results
