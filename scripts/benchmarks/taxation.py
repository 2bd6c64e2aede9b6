"""Target `taxation`: quotes of 10 lines per second, next to a DRF primary-key read (issue 17).

(a) POST /v1/api/taxation/quotes, 10 lines each over 1,000 provisioned products in turn (a group of
    an exclusive and a compound item; the merchant rounds per line), 32 connections, through the
    nginx gateway to the all-in-one WSGI server, authenticated as a platform service (HTTP Basic);
(b) GET /v1/api/taxation/tax-groups/{id}, the DRF primary-key read of the same service, same run;
(c) (a) straight to the WSGI server, to show the gateway's share.
Targets: (a) at least 500 quotes/s with p99 under 50 ms, no failed request.

The group and the 1,000 tax sets (merchant BENCH_MERCHANT) are created once in the bench database
and kept between runs.
"""

from __future__ import annotations

import json
from decimal import Decimal

from benchmarks.framework import PLATFORM_WSGI, PLATFORM_WSGI_APP, Context, Request, bench_service_header

BENCH_MERCHANT = 9_990_000_001
FIRST_PRODUCT = 9_990_000_000_000
PRODUCTS = 1_000
LINES = 10
QUOTES = 200  # distinct request bodies sent in turn
CONNECTIONS = 32
MIN_QUOTE_RPS = 500
MAX_QUOTE_P99_MS = 50


def bench_group() -> int:
    """The bench group's id, its products provisioned (created on first use)."""
    from django.db import connections

    from apps.taxation import services
    from apps.taxation.models import TaxGroup, TaxSet

    group = TaxGroup.objects.filter(merchant_id=BENCH_MERCHANT).order_by("id").first()
    if group is None:
        group = services.tax_group_create(
            merchant_id=BENCH_MERCHANT,
            name="Bench",
            items=[{"name": "GST", "rate": Decimal("5")}, {"name": "QST", "rate": Decimal("9.975"), "compound": True}],
        )
    provisioned = set(TaxSet.objects.filter(merchant_id=BENCH_MERCHANT, status=TaxSet.Status.ACTIVE).values_list("product_id", flat=True))
    for product_id in range(FIRST_PRODUCT, FIRST_PRODUCT + PRODUCTS):
        if product_id not in provisioned:
            services.tax_set_provision(product_id=product_id, tax_group_id=group.id)
    connections.close_all()
    return group.id


def quote_requests(headers: dict[str, str]) -> list[Request]:
    header_items = tuple({**headers, "Content-Type": "application/json"}.items())
    requests = []
    for quote in range(QUOTES):
        lines = [
            {
                "productId": str(FIRST_PRODUCT + (quote * LINES + line) % PRODUCTS),
                "quantity": str(1 + line % 3),
                "unitPrice": 199 + 37 * line + quote,
                "discount": line % 2 * 10,
            }
            for line in range(LINES)
        ]
        body = {"merchantId": str(BENCH_MERCHANT), "currency": "CAD", "lines": lines}
        requests.append(Request("/v1/api/taxation/quotes", "POST", json.dumps(body), header_items))
    return requests


def run(ctx: Context) -> list[dict]:
    ctx.django()

    group_id = bench_group()
    headers = {"Authorization": bench_service_header(ctx)}
    quotes = quote_requests(headers)
    results = []
    server = PLATFORM_WSGI.label
    with ctx.server(PLATFORM_WSGI, PLATFORM_WSGI_APP) as wsgi_url:
        with ctx.gateway(wsgi_url) as url:
            quote = ctx.load(f"(a) quote, {LINES} lines", url, requests=quotes, connections=CONNECTIONS, server=f"nginx + {server}")
            results.append(quote)
            results.append(
                ctx.load(
                    "(b) DRF primary-key read (tax group)",
                    url,
                    requests=[Request(f"/v1/api/taxation/tax-groups/{group_id}", headers=tuple(headers.items()))],
                    connections=CONNECTIONS,
                    server=f"nginx + {server}",
                )
            )
        results.append(ctx.load("(c) (a) without the gateway", wsgi_url, requests=quotes, connections=CONNECTIONS, server=server))
    failed = sum(result["errors"] + result["non_2xx"] for result in results if "errors" in result)
    results.append(ctx.record(f"check: (a) >= {MIN_QUOTE_RPS} quotes/s", value=quote["rps"], passed=quote["rps"] >= MIN_QUOTE_RPS))
    results.append(ctx.record(f"check: (a) p99 < {MAX_QUOTE_P99_MS} ms", value=quote["p99_ms"], passed=quote["p99_ms"] < MAX_QUOTE_P99_MS))
    results.append(ctx.record(f"check: no failed request at {CONNECTIONS} connections", value=failed, passed=failed == 0))
    return results
