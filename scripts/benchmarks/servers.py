"""Target `servers`: which servers (and how many workers and threads) `manage.py serve` should run.

REST (WSGI): gunicorn sync workers, gunicorn gthread and granian's WSGI mode, each on
  - a bare DRF ping (benchmarks.bare_django_app, no middleware), straight from wrk, and
  - the platform's full stack reading one row by primary key, behind the nginx gateway as deployed.
WebSocket side (ASGI): uvicorn (h11/asyncio and httptools/uvloop), daphne and granian, each on
  - a bare ASGI reply (benchmarks.bare.asgi_app), straight from wrk, and
  - a WebSocket echo round trip (same app), from a Python client.
The winners are framework.PLATFORM_WSGI and framework.PLATFORM_ASGI.
"""

from __future__ import annotations

from benchmarks.base import bench_inquiry_pk
from benchmarks.framework import Context, ServerSpec

WSGI_CANDIDATES = (
    ServerSpec("gunicorn", "wsgi", workers=2),
    ServerSpec("gunicorn", "wsgi", workers=4),
    ServerSpec("gunicorn", "wsgi", workers=5),  # deploy/gunicorn.conf.py's default: 2 x cores + 1
    ServerSpec("gunicorn", "wsgi", workers=2, threads=4),
    ServerSpec("gunicorn", "wsgi", workers=4, threads=2),
    ServerSpec("granian", "wsgi", workers=2, threads=1),
    ServerSpec("granian", "wsgi", workers=2, threads=2),
    ServerSpec("granian", "wsgi", workers=4, threads=1),
)

ASGI_CANDIDATES = (
    ServerSpec("uvicorn", "asgi", workers=1, options=("--loop=asyncio", "--http=h11")),
    ServerSpec("uvicorn", "asgi", workers=1, options=("--loop=uvloop", "--http=httptools")),
    ServerSpec("uvicorn", "asgi", workers=2, options=("--loop=uvloop", "--http=httptools")),
    ServerSpec("daphne", "asgi"),
    ServerSpec("granian", "asgi", workers=1, options=("--loop=uvloop",)),
    ServerSpec("granian", "asgi", workers=2, options=("--loop=uvloop",)),
)


def run(ctx: Context) -> list[dict]:
    results = []
    pk = bench_inquiry_pk(ctx)
    for spec in WSGI_CANDIDATES:
        with ctx.server(spec, "benchmarks.bare_django_app:application", settings_module="benchmarks.bare_django") as url:
            results.append(ctx.load("WSGI: bare DRF ping", url + "/drf", server=spec.label))
        with ctx.platform(spec=spec) as url:
            results.append(ctx.load("WSGI: pk read, full stack + gateway", url + f"/bench/inquiries/{pk}", server=spec.label))
    for spec in ASGI_CANDIDATES:
        with ctx.server(spec, "benchmarks.bare:asgi_app", settings_module="benchmarks.bare_django", ready_path="/") as url:
            results.append(ctx.load("ASGI: bare reply", url + "/", server=spec.label))
            results.append(ctx.websocket_echo("ASGI: WebSocket echo", url.replace("http://", "ws://") + "/", server=spec.label))
    return results
