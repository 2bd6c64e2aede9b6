"""Target `stack`: where the time of a request through the platform's stack goes.

1. In-process: each variant calls Django's WSGI handler directly, in a child process of its own (its
   own settings), one request after another on one thread: no server, no network, no load
   generator. Per request it reports wall and CPU time, the best of several batches (the least
   disturbed by other load). Removing one piece at a time shows what that piece costs.
2. Under load, as base measures it: base's (b) bare Django view and (c) probe through the full stack
   and the gateway, then (c) again without the request log line, the largest single piece left.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from benchmarks.base import bench_inquiry_pk
from benchmarks.framework import PLATFORM_SETTINGS, PLATFORM_WSGI, PLATFORM_WSGI_APP, BenchmarkError, Context

PROBE = "/v1/api/outreach/healthz"
SECURITY_MIDDLEWARE = "django.middleware.security.SecurityMiddleware"
BROWSER_MIDDLEWARE = "merchant_platform.middleware.BrowserMiddleware"
NO_REQUEST_LOG = {"LOG_LEVEL": "WARNING"}
CALLS_PER_BATCH = 500
BATCHES = 10


def drop(*middleware: str) -> dict[str, str]:
    return {"BENCH_DROP_MIDDLEWARE": ",".join(middleware)}


def in_process_variants(pk: int) -> list[tuple[str, str, str, dict[str, str]]]:
    """(name, settings module, path, extra environment)."""
    return [
        ("in-process: bare Django view (no middleware)", "benchmarks.bare_django", "/django", {}),
        ("in-process: bare DRF ping (no middleware)", "benchmarks.bare_django", "/drf", {}),
        ("in-process: probe, full stack", PLATFORM_SETTINGS, PROBE, {}),
        ("in-process: probe, no request log line", PLATFORM_SETTINGS, PROBE, NO_REQUEST_LOG),
        ("in-process: probe, no SecurityMiddleware", PLATFORM_SETTINGS, PROBE, drop(SECURITY_MIDDLEWARE)),
        ("in-process: probe, no BrowserMiddleware", PLATFORM_SETTINGS, PROBE, drop(BROWSER_MIDDLEWARE)),
        ("in-process: process-wide probe /healthz (no service routing)", PLATFORM_SETTINGS, "/healthz", {}),
        ("in-process: pk read, full stack", PLATFORM_SETTINGS, f"/bench/inquiries/{pk}", {}),
    ]


def run(ctx: Context) -> list[dict]:
    results = []
    for name, settings_module, path, env in in_process_variants(bench_inquiry_pk(ctx)):
        ctx.wait_for_quiet_machine()
        command = [sys.executable, "-m", "benchmarks.stack", path]
        completed = subprocess.run(command, env=ctx.server_env(settings_module, **env), capture_output=True, text=True, check=False)  # noqa: S603
        if completed.returncode != 0:
            raise BenchmarkError(f"{name}: {completed.stderr[-2000:]}")
        results.append(ctx.record(name, **json.loads(completed.stdout.strip().splitlines()[-1])))

    spec = PLATFORM_WSGI
    server = spec.label
    with ctx.server(spec, "benchmarks.bare_django_app:application", settings_module="benchmarks.bare_django") as url:
        bare = ctx.load("(b) bare Django view", url + "/django", server=server)
    results.append(bare)
    for name, env in (("(c) probe, full stack + gateway", {}), ("(c) without the request log line", NO_REQUEST_LOG)):
        with ctx.server(spec, PLATFORM_WSGI_APP, env=env) as wsgi_url, ctx.gateway(wsgi_url) as gateway_url:
            probe = ctx.load(name, gateway_url + PROBE, server=f"nginx + {server}")
        results.append(probe)
        results.append(
            ctx.record(
                f"  ratio to (b): {name[4:]}",
                value=f"{probe['rps'] / bare['rps']:.0%} (by CPU/req {bare['cpu_us_per_req'] / probe['cpu_us_per_req']:.0%})",
            )
        )
    return results


def measure(path: str) -> dict:
    """In the child: time Django's WSGI handler on `path` (settings from the environment)."""
    import io
    import logging
    from wsgiref.util import setup_testing_defaults

    from django.core.wsgi import get_wsgi_application

    application = get_wsgi_application()
    # Log lines go to memory: the cost of rendering them is measured, not the terminal's.
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(io.StringIO())

    statuses: list[str] = []

    def call() -> None:
        environ: dict = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "HTTP_HOST": "127.0.0.1"}
        setup_testing_defaults(environ)
        response = application(environ, lambda status, headers, exc_info=None: statuses.append(status))
        b"".join(response)
        response.close()  # as a WSGI server does: Django's request_finished work is part of the cost

    call()
    if not statuses[0].startswith("200"):
        raise SystemExit(f"{path} answered {statuses[0]}")
    for _ in range(CALLS_PER_BATCH):
        call()
    best_wall = best_cpu = float("inf")
    for _ in range(BATCHES):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(CALLS_PER_BATCH):
            call()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return {"wall_us_per_req": round(best_wall / CALLS_PER_BATCH * 1e6), "cpu_us_per_req": round(best_cpu / CALLS_PER_BATCH * 1e6)}


if __name__ == "__main__":
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the request lines, written when their writer flushes
        figures = measure(sys.argv[1])
        from merchant_platform.logging import flush_request_lines

        flush_request_lines()
    print(json.dumps(figures))
