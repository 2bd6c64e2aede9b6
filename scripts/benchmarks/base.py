"""Target `base`: the platform's request path against the bare limits, in one run.

(a) a bare WSGI reply, (b) a bare Django view (no middleware), (c) a probe through the full
middleware stack and the nginx gateway, (d) one row read by primary key through the full stack and
the gateway; plus the probe without the gateway and a bare DRF ping, to show where the time goes.
All under the WSGI server `manage.py serve` uses (framework.PLATFORM_WSGI) and the same wrk load.
Targets (issue 2): (c) keeps at least 60% of (b)'s throughput; no request fails at 64 connections.

The row of (d) is a real service row, an outreach Inquiry (`outreach` alias and schema, snowflake id),
read without authentication by a bench-only DRF view (platform_views.InquiryRowView) that
benchmarks.platform_settings mounts next to the product's routes.
"""

from __future__ import annotations

from benchmarks.framework import PLATFORM_WSGI, PLATFORM_WSGI_APP, Context

PROBE = "/v1/api/outreach/healthz"
MIN_PROBE_SHARE = 0.60


def bench_inquiry_pk(ctx: Context) -> int:
    """The primary key of the outreach inquiry (d) reads (created once, kept between runs)."""
    ctx.django()
    from django.db import connections

    from apps.outreach.models import Inquiry

    inquiry, _ = Inquiry.objects.get_or_create(
        email="bench-row@example.invalid",
        subject="bench row",
        defaults={"name": "Bench", "message": "The row scripts/bench base reads by primary key."},
    )
    connections.close_all()
    return inquiry.pk


def run(ctx: Context) -> list[dict]:
    spec = PLATFORM_WSGI
    server = spec.label
    results = []
    with ctx.server(spec, "benchmarks.bare:wsgi_app", settings_module="benchmarks.bare_django", ready_path="/") as url:
        results.append(ctx.load("(a) bare WSGI reply", url + "/", server=server))
    with ctx.server(spec, "benchmarks.bare_django_app:application", settings_module="benchmarks.bare_django") as url:
        bare_django = ctx.load("(b) bare Django view", url + "/django", server=server)
        results.append(bare_django)
        results.append(ctx.load("bare DRF ping", url + "/drf", server=server))
    pk = bench_inquiry_pk(ctx)
    with ctx.server(spec, PLATFORM_WSGI_APP) as wsgi_url:
        results.append(ctx.load("probe, full stack, no gateway", wsgi_url + PROBE, server=server))
        with ctx.gateway(wsgi_url) as gateway_url:
            probe = ctx.load("(c) probe, full stack + gateway", gateway_url + PROBE, server=f"nginx + {server}")
            results.append(probe)
            results.append(
                ctx.load("(d) pk read, full stack + gateway", gateway_url + f"/bench/inquiries/{pk}", server=f"nginx + {server}")
            )

    share = probe["rps"] / bare_django["rps"]
    # The same ratio from server CPU per request, which other load on the machine disturbs less.
    cpu_share = bare_django["cpu_us_per_req"] / max(1, probe["cpu_us_per_req"])
    failed = sum(result["errors"] + result["non_2xx"] for result in results)
    results.append(
        ctx.record("check: (c) >= 60% of (b)", value=f"{share:.0%} (by CPU/req {cpu_share:.0%})", passed=share >= MIN_PROBE_SHARE)
    )
    results.append(ctx.record(f"check: no failed request at {ctx.connections} connections", value=failed, passed=failed == 0))
    return results
