"""The gateway configs of deploy/nginx: both pass `nginx -t`, and both route real requests to real
servers (the all-in-one one through `manage.py serve`, the split one in front of its WSGI server)."""

from __future__ import annotations

import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from merchant_platform.management.commands.serve import gateway_argv, render_gateway_config
from tests.support.deploy import nginx_argv
from tests.support.deploy import render_split_config as render_split
from tests.support.ports import free_port, wait_for_port
from tests.tooling.conftest import PORTS, platform_env

pytestmark = pytest.mark.slow


def render_split_config(directory: Path, *, listen_port: int, rest_port: int, stream_port: int) -> Path:
    """split.conf with every service's REST upstream at `rest_port` and signal's stream at `stream_port`."""
    return render_split(
        directory, listen_port=listen_port, address=lambda host, port: f"127.0.0.1:{rest_port if port == 3000 else stream_port}"
    )


def nginx_test(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*nginx_argv(config), "-t"], capture_output=True, text=True, timeout=30, check=False)


def test_all_in_one_config_passes_nginx_t(tmp_path):
    config = render_gateway_config(directory=tmp_path, listen="127.0.0.1:18599", wsgi="127.0.0.1:18598", asgi="127.0.0.1:18597")
    result = nginx_test(config)
    assert result.returncode == 0, result.stderr


def test_split_config_passes_nginx_t(tmp_path):
    result = nginx_test(render_split_config(tmp_path, listen_port=18599, rest_port=18598, stream_port=18597))
    assert result.returncode == 0, result.stderr


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_serve_runs_the_all_in_one_gateway_and_sigint_stops_everything(start_process, python):
    gateway, wsgi, asgi = free_port(PORTS), free_port(PORTS), free_port(PORTS)
    env = platform_env(GATEWAY_PORT=str(gateway), WSGI_PORT=str(wsgi), ASGI_PORT=str(asgi))
    serve = start_process([python, "manage.py", "serve", "--roles", "web,ws,gateway"], env=env)
    for port in (wsgi, asgi, gateway):
        wait_for_port(port, process=serve, seconds=60)
    base = f"http://127.0.0.1:{gateway}"

    probe = requests.get(f"{base}/healthz", headers={"X-Request-Id": "tooling-probe-1"}, timeout=30)
    assert probe.status_code == 200, probe.text
    assert probe.json()["status"] == "ok"
    assert probe.headers["X-Request-Id"] == "tooling-probe-1"

    document = requests.get(f"{base}/v1/api/outreach/doc/openapi.json", timeout=60)
    assert document.status_code == 200
    assert document.json()["openapi"].startswith("3.")

    # /stream reaches the ASGI server (an answer from Django there), not a gateway error.
    stream = requests.get(f"{base}/stream", timeout=30)
    assert stream.headers["Content-Type"].startswith("application/problem+json")
    assert stream.json()["code"] != "UPSTREAM_UNAVAILABLE"
    assert "X-Request-Id" in stream.headers

    started = descendants(serve.pid)
    assert len(started) >= 4  # granian and its workers, the ASGI server, nginx and its workers
    serve.send_signal(signal.SIGINT)
    assert serve.wait(timeout=30) == 0, serve.log.read_text()[-3000:]
    assert not [pid for pid in started if alive(pid)]


@pytest.fixture
def split_gateway(tmp_path, start_process, python):
    """deploy/nginx/split.conf in front of one WSGI server (`serve --roles web`) serving every service;
    /stream's upstream is a closed port."""
    listen, rest, stream = free_port(PORTS), free_port(PORTS), free_port(PORTS)
    wsgi = start_process([python, "manage.py", "serve", "--roles", "web"], env=platform_env(WSGI_PORT=str(rest)))
    nginx = start_process(nginx_argv(render_split_config(tmp_path, listen_port=listen, rest_port=rest, stream_port=stream)))
    wait_for_port(rest, process=wsgi, seconds=60)
    wait_for_port(listen, process=nginx)
    return f"http://127.0.0.1:{listen}"


def test_split_gateway_routes_by_prefix_with_the_signal_and_error_policies(split_gateway):
    inventory = requests.get(f"{split_gateway}/v1/api/inventory/healthz", timeout=30)
    assert inventory.status_code == 200
    assert "Strict-Transport-Security" not in inventory.headers

    signal_health = requests.get(f"{split_gateway}/v1/api/signal/health", timeout=30)
    assert signal_health.status_code == 200
    assert signal_health.headers["X-Frame-Options"] == "DENY"
    assert signal_health.headers["Strict-Transport-Security"].startswith("max-age=")

    # /jw-certs goes to identity (the answer comes from the application: it echoes X-Request-Id).
    certs = requests.get(f"{split_gateway}/jw-certs", headers={"X-Request-Id": "tooling-jwks"}, timeout=30)
    assert certs.headers.get("X-Request-Id") == "tooling-jwks"

    unrouted = requests.get(f"{split_gateway}/nowhere", timeout=30)
    assert unrouted.status_code == 404
    assert unrouted.json()["code"] == "NOT_FOUND"

    stream = requests.get(f"{split_gateway}/stream", timeout=30)
    assert stream.status_code == 502
    assert stream.headers["Content-Type"] == "application/problem+json"
    assert stream.json()["code"] == "UPSTREAM_UNAVAILABLE"

    too_large = requests.post(f"{split_gateway}/v1/api/commerce/anything", data=b"x" * (11 * 1024 * 1024), timeout=30)
    assert too_large.status_code == 413
    assert too_large.json()["code"] == "PAYLOAD_TOO_LARGE"


def test_errors_the_gateway_makes_itself_are_problems_not_html(split_gateway):
    long_uri = requests.get(f"{split_gateway}/v1/api/outreach/inquiries?q={'x' * 20_000}", timeout=30)
    huge_header = requests.get(f"{split_gateway}/v1/api/outreach/healthz", headers={"X-Filler": "y" * 20_000}, timeout=30)
    trace = requests.request("TRACE", f"{split_gateway}/v1/api/outreach/healthz", timeout=30)  # nginx refuses TRACE itself
    for response, status, code in [
        (long_uri, 414, "URI_TOO_LONG"),
        (huge_header, 400, "BAD_REQUEST"),
        (trace, 405, "METHOD_NOT_ALLOWED"),
    ]:
        assert response.status_code == status, (status, response.headers, response.text[:300])
        assert response.headers["Content-Type"] == "application/problem+json"
        assert response.json()["code"] == code and b"<html" not in response.content.lower()


def test_split_gateway_rate_limits_identity_auth(split_gateway):
    with requests.Session() as session:
        statuses = [session.post(f"{split_gateway}/v1/api/identity/auth/sign-in", json={}, timeout=30) for _ in range(30)]
    limited = [response for response in statuses if response.status_code == 429]
    assert limited, [response.status_code for response in statuses]
    assert limited[0].json()["code"] == "RATE_LIMITED"
    assert limited[0].headers["Retry-After"] == "1"


class _Upstream(BaseHTTPRequestHandler):
    """Stands for the WSGI server behind the all-in-one gateway: 200 to everything."""

    def _answer(self):
        body = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        """No access log on stderr."""


@pytest.fixture
def all_in_one_gateway(tmp_path, start_process):
    """deploy/nginx/all-in-one.conf.template, rendered as `serve` renders it, in front of a server
    that answers 200 to every request (the limits are the gateway's alone)."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    listen = free_port(PORTS)
    config = render_gateway_config(
        directory=tmp_path / "gateway", listen=f"127.0.0.1:{listen}", wsgi=f"127.0.0.1:{upstream.server_port}", asgi="127.0.0.1:9"
    )
    nginx = start_process(list(gateway_argv(config)))
    wait_for_port(listen, process=nginx)
    yield f"http://127.0.0.1:{listen}"
    upstream.shutdown()
    upstream.server_close()


def burst(url: str, *, method: str = "GET", count: int = 60) -> list[requests.Response]:
    with requests.Session() as session:
        return [session.request(method, url, timeout=30) for _ in range(count)]


def assert_rate_limited(responses: list[requests.Response]) -> None:
    limited = [response for response in responses if response.status_code == 429]
    assert limited, [response.status_code for response in responses]
    assert limited[0].json()["code"] == "RATE_LIMITED" and limited[0].headers["Retry-After"] == "1"


def test_all_in_one_gateway_rate_limits_the_admin(all_in_one_gateway):
    assert_rate_limited(burst(f"{all_in_one_gateway}/admin/login/"))
    assert requests.get(f"{all_in_one_gateway}/v1/api/ledger/healthz", timeout=30).status_code == 200  # its own limit only


@pytest.mark.parametrize(
    "path",
    [
        "/v1/api/identity/auth/sign-in",
        "/v1/api/outreach/inquiries/submit",
        "/v1/api/outreach/subscribers/subscribe",
        "/v1/api/outreach/subscribers/confirm",
        "/v1/api/outreach/subscribers/unsubscribe",
    ],
)
def test_all_in_one_gateway_applies_the_split_gateways_public_limits(all_in_one_gateway, path):
    assert_rate_limited(burst(f"{all_in_one_gateway}{path}", method="POST", count=30))


def test_split_gateway_rate_limits_outreach_confirm(split_gateway):
    assert_rate_limited(burst(f"{split_gateway}/v1/api/outreach/subscribers/confirm", method="POST", count=30))
