"""Inventory's gateway limit (spec 8): 100 requests per second per client IP on its routes, in both
nginx configurations, answered 429 in the shared error shape; other prefixes are not limited by it.
nginx runs each real config in front of a plain HTTP server standing in for the application."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from merchant_platform.management.commands.serve import render_gateway_config
from tests.support.ports import free_port, wait_for_port
from tests.tooling.conftest import PORTS, start_process  # noqa: F401 (fixture)
from tests.tooling.test_gateway import nginx_argv, render_split_config

pytestmark = pytest.mark.slow


def burst(url: str, count: int = 400) -> list[requests.Response]:
    def one(_):
        return requests.get(url, timeout=30)

    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(one, range(count)))


def start_gateway(start_process, config, listen: int, upstream: int):  # noqa: F811
    backend = start_process([sys.executable, "-m", "http.server", str(upstream), "--bind", "127.0.0.1"])
    nginx = start_process(nginx_argv(config))
    wait_for_port(upstream, process=backend)
    wait_for_port(listen, process=nginx)
    return f"http://127.0.0.1:{listen}"


def check_limit(base: str) -> None:
    limited = [r for r in burst(f"{base}/v1/api/inventory/healthz") if r.status_code == 429]
    assert limited, "no request was limited"
    assert limited[0].headers["Content-Type"] == "application/problem+json"
    assert limited[0].json()["code"] == "RATE_LIMITED" and limited[0].headers["Retry-After"] == "1"
    assert not [r for r in burst(f"{base}/v1/api/commerce/healthz", count=200) if r.status_code == 429]


def test_all_in_one_gateway_limits_inventory(tmp_path, start_process):  # noqa: F811
    listen, upstream = free_port(PORTS), free_port(PORTS)
    config = render_gateway_config(directory=tmp_path, listen=f"127.0.0.1:{listen}", wsgi=f"127.0.0.1:{upstream}", asgi="127.0.0.1:9")
    check_limit(start_gateway(start_process, config, listen, upstream))


def test_split_gateway_limits_inventory(tmp_path, start_process):  # noqa: F811
    listen, upstream = free_port(PORTS), free_port(PORTS)
    config = render_split_config(tmp_path, listen_port=listen, rest_port=upstream, stream_port=9)
    check_limit(start_gateway(start_process, config, listen, upstream))
