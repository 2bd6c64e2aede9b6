"""deploy/ run by a test, the files staying the one source: a copy of nginx/split.conf whose
upstream servers (`identity:3000`, `signal:3001`, ... as compose names them) point at local ports,
inside a minimal main config with every path (pid, logs, temp files) under the test's directory;
compose.yaml's service-to-service URLs, their hosts pointed at local ports the same way; and the
variables compose gives one container of its own (payment's run mode, say)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SPLIT_CONFIG = ROOT / "deploy" / "nginx" / "split.conf"
COMPOSE = ROOT / "deploy" / "compose.yaml"
_UPSTREAM_SERVER = re.compile(r"server (\w+):(\d+)")
_SERVICE_URL = re.compile(r"^http://(\w+):(\d+)(/.*)?$")


def nginx_binary() -> str:
    for candidate in ("nginx", "/usr/sbin/nginx"):
        found = shutil.which(candidate)
        if found:
            return found
    pytest.fail("nginx is not installed (scripts/test installs it)")


def nginx_argv(config: Path) -> list[str]:
    directory = config.parent
    return [nginx_binary(), "-p", f"{directory}/", "-c", str(config), "-e", str(directory / "error.log")]


def split_upstreams() -> set[tuple[str, int]]:
    """The (host, port) pairs split.conf's upstreams name: compose's service hosts."""
    return {(host, int(port)) for host, port in _UPSTREAM_SERVER.findall(SPLIT_CONFIG.read_text())}


def render_split_config(directory: Path, *, listen_port: int, address: Callable[[str, int], str], access_log: bool = False) -> Path:
    """split.conf with each upstream server `host:port` replaced by `address(host, port)` and its
    `listen 80` by 127.0.0.1:`listen_port`; returns the main config to run nginx with. With
    `access_log`, each request is logged to access.log with the X-Request-Id the gateway sent on."""
    text = _UPSTREAM_SERVER.sub(lambda match: f"server {address(match[1], int(match[2]))}", SPLIT_CONFIG.read_text())
    text = text.replace("listen 80;", f"listen 127.0.0.1:{listen_port};")
    (directory / "split.conf").write_text(text)
    (directory / "tmp").mkdir(exist_ok=True)
    temp_paths = "\n".join(f"    {kind}_temp_path {directory}/tmp/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    logging = (
        f"    log_format with_request_id '$request_method $uri $status upstream=$upstream_addr requestId=$request_id_out';\n"
        f"    access_log {directory}/access.log with_request_id;"
        if access_log
        else "    access_log off;"
    )
    main = directory / "nginx.conf"
    main.write_text(
        f"daemon off;\nworker_processes 1;\npid {directory}/nginx.pid;\nerror_log {directory}/error.log warn;\n"
        f"events {{ worker_connections 256; }}\n"
        f"http {{\n{temp_paths}\n    include {directory}/split.conf;\n{logging}\n}}\n"
    )
    return main


def compose_service_urls(address: Callable[[str, int], str] | None = None) -> dict[str, str]:
    """The variables every compose container gets (`x-app-env`) whose value is a URL of a platform
    service's container (`http://inventory:3000/...`, not a component's); with `address`, each
    `host:port` replaced by `address(host, port)`."""
    environment = yaml.safe_load(COMPOSE.read_text())["x-app-env"]
    services = {host for host, _ in split_upstreams()}
    found = {}
    for name, value in environment.items():
        match = _SERVICE_URL.match(str(value))
        if match and match[1] in services:
            host, port, path = match[1], int(match[2]), match[3] or ""
            found[name] = f"http://{address(host, port) if address else f'{host}:{port}'}{path}"
    return found


def compose_container_variables(container: str, *names: str) -> dict[str, str]:
    """Those of the variables `names` that compose.yaml sets for `container`."""
    environment = yaml.safe_load(COMPOSE.read_text())["services"][container]["environment"]
    return {name: str(environment[name]) for name in names if name in environment}
