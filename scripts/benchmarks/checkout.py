"""Target `checkout`: the platform's headline figure (issue 20). The whole platform as processes
(tests/checkout/platform.py: a scratch database, topics and consumer groups of its own,
`manage.py serve --gateway` plus `manage.py consume`), one merchant set up as the scenario test does
(tests/checkout/test_scenario.py), then CHECKOUT_CLIENTS (16) clients, each in a loop for
`--duration` seconds: create a sale order of one unit (QR), place it, pay it at the fake provider
(its signed IPN is acknowledged by payment), and wait until commerce shows it PAID (payment's
signed webhook). Reported:

(a) orders placed and paid end to end per second (orders PAID within the window / window), with the
    client's p50/p99 of one whole checkout;
(b) from the IPN's acknowledgement to the stock deducted (inventory's DEDUCT tracking row) and to
    the SALE voucher posted (finance), p50 and p99, read after the load from the services' APIs
    (`createdAt` of the rows, the voucher found by its source, the paid attempt; one clock:
    everything runs on this machine).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime

import requests

from benchmarks.framework import PORT_RANGES, BenchmarkError, Context, CpuMeter

CLIENTS = int(os.environ.get("CHECKOUT_CLIENTS", "16"))
STOCK = 1_000_000
# The WSGI threads per worker of the public server (`serve`'s default 2 x 2 unless set): a placing's
# calls to taxation, inventory and payment go to the internal listener, so fewer threads than clients
# queue requests instead of starving (before the internal listener, 2 x 2 answered every placing with
# 503 TAXATION_UNAVAILABLE at 16 clients).
WEB_THREADS = os.environ.get("CHECKOUT_WEB_THREADS", "2")
POLL_SECONDS = 0.05
SETTLE_SECONDS = 120.0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def run(ctx: Context) -> list[dict]:
    ctx.django()
    from apps.payment.fake_provider import FakeProvider
    from tests.checkout.platform import new_seller, running_platform, wait_for
    from tests.checkout.test_scenario import COMMERCE, FINANCE, INVENTORY, open_shop

    provider = FakeProvider(secret="bench-provider-secret-0123456789", retry_interval_seconds=0.5).start()
    try:
        with running_platform(ports=PORT_RANGES["checkout"], WEB_THREADS=WEB_THREADS) as platform:
            api = new_seller(platform)
            shop = open_shop(platform, api, provider, received=STOCK)
            ctx.say(f"  platform at {platform.base}; merchant {shop.merchant_id}; {CLIENTS} clients; 2 x {WEB_THREADS} WSGI threads")

            ipn_at: dict[str, float] = {}  # order id -> wall clock of the IPN's acknowledgement
            attempts: dict[str, str] = {}  # order id -> its paid attempt (a SALE voucher's source)
            durations: list[float] = []
            failures: list[str] = []
            stop = threading.Event()
            lock = threading.Lock()

            def client() -> None:
                from tests.checkout.platform import Api

                own = Api(platform.base, api.token)
                while not stop.is_set():
                    started = time.monotonic()
                    try:
                        order = own.post(
                            f"{COMMERCE}/sale-orders",
                            {
                                "merchantId": shop.merchant_id,
                                "lines": [{"variantId": shop.variant_id, "quantity": 1}],
                                "paymentChannel": "QR",
                                "financeAccountId": shop.cash_account_id,
                            },
                        )
                        placed = own.post(f"{COMMERCE}/sale-orders/{order['id']}/actions/place")
                        attempt = placed["payment"]["attempts"][0]
                        provider.pay(attempt["code"], wait=True)
                        acknowledged = time.time()
                        while own.get(f"{COMMERCE}/sale-orders/{order['id']}")["status"] != "PAID":
                            if time.time() - acknowledged > SETTLE_SECONDS:
                                raise AssertionError(f"order {order['id']} not PAID {SETTLE_SECONDS:.0f} s after its IPN")
                            time.sleep(POLL_SECONDS)
                    except (AssertionError, requests.RequestException) as exc:
                        with lock:
                            failures.append(str(exc)[:300])
                        continue
                    with lock:
                        if not stop.is_set():
                            ipn_at[order["id"]] = acknowledged
                            attempts[order["id"]] = attempt["id"]
                            durations.append(time.monotonic() - started)

            ctx.wait_for_quiet_machine()
            groups = {os.getpgid(process.pid) for process in platform.processes.values()}
            threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
            meter = CpuMeter(groups)
            window_started = time.monotonic()
            for thread in threads:
                thread.start()
            time.sleep(ctx.duration)
            stop.set()
            window = time.monotonic() - window_started
            for thread in threads:
                thread.join(timeout=60)
            cpu = meter.stop(len(durations))
            if not durations:
                raise BenchmarkError(f"no order was paid; failures: {failures[:3]}")
            results_ = [
                ctx.record(
                    f"(a) orders placed and paid end to end, {CLIENTS} clients",
                    rate=round(len(durations) / window, 1),
                    unit="orders/s",
                    p50_ms=round(percentile(durations, 0.5) * 1000),
                    p99_ms=round(percentile(durations, 0.99) * 1000),
                    errors=len(failures),
                    **cpu,
                )
            ]

            # (b) IPN -> stock deducted, IPN -> SALE voucher posted, from the services' records.
            def deducted() -> dict[str, float]:
                rows, page = {}, 1
                while True:
                    body = api.get(
                        f"{INVENTORY}/tracking",
                        merchantId=shop.merchant_id,
                        referenceType="SALE_ORDER",
                        operation="DEDUCT",
                        page=page,
                        pageSize=200,
                    )
                    rows.update({row["referenceId"]: _instant(row["createdAt"]) for row in body["results"]})
                    if not body.get("next"):
                        return rows
                    page += 1

            def vouchers() -> dict[str, float]:
                found, page = {}, 1
                while True:
                    body = api.get(f"{FINANCE}/vouchers", merchantId=shop.merchant_id, kind="SALE", page=page, pageSize=200)
                    found.update({row["sourceId"]: _instant(row["createdAt"]) for row in body["results"]})
                    if not body.get("next"):
                        return found
                    page += 1

            wait_for(lambda: set(ipn_at) <= set(deducted()), timeout=SETTLE_SECONDS, message="every deduction", interval=1.0)
            deductions = deducted()
            stock_lag = [(deductions[order_id] - at) * 1000 for order_id, at in ipn_at.items()]
            wait_for(lambda: set(attempts.values()) <= set(vouchers()), timeout=SETTLE_SECONDS, message="every SALE voucher", interval=1.0)
            posted = vouchers()
            sale_lag = [(posted[attempts[order_id]] - at) * 1000 for order_id, at in ipn_at.items()]
            for name, lags in (("(b) IPN to stock deducted", stock_lag), ("(b) IPN to SALE voucher posted", sale_lag)):
                results_.append(
                    ctx.record(name, p50_ms=round(percentile(lags, 0.5)), p99_ms=round(percentile(lags, 0.99)), value=f"{len(lags)} orders")
                )
            return results_
    finally:
        provider.stop()


def _instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
