"""Target `outreach`: the public inquiry submit under concurrent load, next to its bare limit, in one run.

(a) a bare Django view (benchmarks.outreach_bare) parsing the same JSON body and doing one INSERT
into outreach.inquiry through a raw cursor, over a pooled connection set up as the platform's;
(a2) the same view doing the INSERT with `Model.objects.create()`, as a Django view usually does;
(f) the same bare project doing what the issue requires of the submit and nothing of the platform:
DRF validation, the ORM INSERT and two PUBLISHes (not a target: the floor, shown as shares of (a)
and (a2));
(b) POST /v1/api/outreach/inquiries/submit through the platform's full stack: middleware, DRF
parsing, strict validation, the INSERT and the `inquiry.sent` notification to two rooms, handed to
the publisher thread after the commit; (c) the same through the nginx gateway. Same WSGI server
(framework.PLATFORM_WSGI) and wrk load.
Target (issue 5): (b) keeps at least 70% of the bare view's throughput; no request fails. The issue's
"a bare Django view doing one INSERT" fits both (a) and (a2), so both shares are checked and shown.

The table is emptied before the run, so both sides insert into the same small table.
"""

from __future__ import annotations

import json

from benchmarks.framework import PLATFORM_WSGI, PLATFORM_WSGI_APP, Context

SUBMIT = "/v1/api/outreach/inquiries/submit"
MIN_SHARE = 0.70
HEADERS = {"Content-Type": "application/json"}
BODY = json.dumps(
    {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "subject": "Wholesale prices",
        "message": "Hello,\nwe would like to order 200 units every month. What are your wholesale prices and delivery times?",
        "merchantId": "382567179885215744",
    }
)


def empty_inquiry_table(ctx: Context) -> None:
    ctx.django()
    from django.db import connections

    with connections["outreach"].cursor() as cursor:
        cursor.execute("TRUNCATE outreach.inquiry")
    connections.close_all()


def run(ctx: Context) -> list[dict]:
    spec = PLATFORM_WSGI
    server = spec.label
    post = {"method": "POST", "body": BODY, "headers": HEADERS, "expect_status": 201}
    empty_inquiry_table(ctx)
    results = []
    with ctx.server(spec, "benchmarks.outreach_bare:application", settings_module="benchmarks.outreach_bare") as url:
        bare = ctx.load("(a) bare Django view, one INSERT (cursor)", url + "/insert", server=server, **post)
        bare_orm = ctx.load("(a2) bare Django view, one INSERT (ORM)", url + "/orm", server=server, **post)
        floor = ctx.load("(f) bare Django view, the required work", url + "/required", server=server, **post)
        results += [bare, bare_orm, floor]
    with ctx.server(spec, PLATFORM_WSGI_APP) as url:
        submit = ctx.load("(b) public submit, full stack", url + SUBMIT, server=server, **post)
        results.append(submit)
        with ctx.gateway(url) as gateway_url:
            results.append(ctx.load("(c) public submit, full stack + gateway", gateway_url + SUBMIT, server=f"nginx + {server}", **post))

    failed = sum(result["errors"] + result["non_2xx"] for result in results)
    for label, reference in (("(a)", bare), ("(a2)", bare_orm)):
        share = submit["rps"] / reference["rps"]
        results.append(ctx.record(f"check: (b) >= {MIN_SHARE:.0%} of {label}", value=f"{share:.0%}", passed=share >= MIN_SHARE))
        results.append(ctx.record(f"(f) as a share of {label}", value=f"{floor['rps'] / reference['rps']:.0%}"))
    results.append(ctx.record(f"check: no failed request at {ctx.connections} connections", value=failed, passed=failed == 0))
    return results
