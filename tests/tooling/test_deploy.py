"""deploy/ agrees with the service registry: the split gateway routes every service's prefix to
its own upstream, and compose.yaml runs every service with its name and worker id, payment as an
API container and WORKER containers with ids 91+i, and probes every web server every 30 s."""

from __future__ import annotations

import re

import pytest
import yaml

from merchant_platform.registry import all_services
from settings.payment import PAYMENT_MODE_ROLES, PAYMENT_WORKER_ID_BASE, payment_worker_node_id
from tests.support.deploy import compose_service_urls
from tests.tooling.conftest import ROOT

DEPLOY = ROOT / "deploy"
SPLIT = (DEPLOY / "nginx" / "split.conf").read_text()
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())


@pytest.mark.parametrize("service", all_services(), ids=lambda service: service.name)
def test_split_gateway_routes_each_prefix_to_its_service_on_port_3000(service):
    assert re.search(rf"upstream {service.name} {{ server {service.name}:3000 ", SPLIT)
    location = re.search(rf"location {re.escape(service.prefix)}/ {{(.*?)}}", SPLIT, re.S)
    assert location, f"no location for {service.prefix}/"
    assert f"proxy_pass http://{service.name};" in location.group(1)


def test_split_gateway_special_routes():
    assert re.search(r"location = /jw-certs {\s*proxy_pass http://identity;", SPLIT)
    stream = re.search(r"location /stream {(.*?)}", SPLIT, re.S).group(1)
    assert "proxy_pass http://signal_stream;" in stream
    assert "limit_req" not in stream  # spec 1.5: no middleware on the WebSocket router
    assert re.search(r"location /v1/api/inventory/ {\s*limit_req zone=inventory", SPLIT)
    assert "zone=inventory:10m rate=100r/s;" in SPLIT
    assert re.search(r"location /v1/api/identity/auth/ {\s*limit_req zone=identity_auth", SPLIT)
    assert re.search(r"location /api/pay/ {\s*proxy_pass http://payment;", SPLIT)


@pytest.mark.parametrize("service", all_services(), ids=lambda service: service.name)
def test_compose_runs_each_service_with_its_name_and_worker_id(service):
    container = COMPOSE["services"][service.name]
    environment = container["environment"]
    assert environment["APP_SERVICE"] == service.name
    assert environment[service.worker_id_env] == str(service.worker_id)
    assert "3000" in str(container.get("expose", []))
    assert container["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_compose_runs_ledgers_api_and_worker_roles_apart():
    api, worker = COMPOSE["services"]["ledger"]["environment"], COMPOSE["services"]["ledger-worker"]["environment"]
    assert (api["APP_ENV_APPLICATION_ROLES"], worker["APP_ENV_APPLICATION_ROLES"]) == ("api", "worker")
    assert worker["APP_SERVICE"] == "ledger" and worker["APP_ENV_NODE_ID"] != api["APP_ENV_NODE_ID"]
    assert api["LEDGER_FINANCE_URL"] == worker["LEDGER_FINANCE_URL"] == "http://finance:3000/v1/api/finance"
    assert "ledger-worker" not in SPLIT  # only the api role is routed (spec 1.4)


def test_compose_runs_payment_as_an_api_and_workers_with_ids_91_plus_i():
    """Spec 1.4: FULL is for development (production refuses it); the gateway routes the API only,
    WORKER number i runs with worker id 91+i and one worker runs Celery beat."""
    payment = {
        name: container
        for name, container in COMPOSE["services"].items()
        if container.get("environment", {}).get("APP_SERVICE") == "payment"
    }
    modes = {name: container["environment"]["PAYMENT_MODE"] for name, container in payment.items()}
    assert modes == {"payment": "API", "payment-worker-0": "WORKER", "payment-worker-1": "WORKER"}
    workers = sorted(name for name, mode in modes.items() if mode == "WORKER")
    roles = []
    for number, name in enumerate(workers):
        environment = payment[name]["environment"]
        assert environment["PAYMENT_WORKER_NUMBER"] == str(number) and "APP_ENV_NODE_ID" not in environment
        assert payment_worker_node_id("WORKER", number, None) == str(PAYMENT_WORKER_ID_BASE + number)
        roles.append(environment.get("SERVE_ROLES", PAYMENT_MODE_ROLES["WORKER"]).split(","))
        assert name not in SPLIT
    assert [worker_roles.count("beat") for worker_roles in roles] == [1, 0]
    # Celery for the deliveries; the web server (no REST in WORKER mode: the probes) holds the id.
    assert all({"web", "worker"} <= set(worker_roles) for worker_roles in roles)


def test_compose_probes_every_web_server_every_30_seconds_and_the_gateway_waits_for_them():
    services = COMPOSE["services"]
    with_web = [name for name, container in services.items() if container.get("expose")]
    assert {service.name for service in all_services()} | {"ledger-worker", "payment-worker-0", "payment-worker-1"} == set(with_web)
    for name in with_web:
        check = services[name]["healthcheck"]
        assert check["interval"] == "30s" and check["test"][:3] == ["CMD", "python", "-c"], name
    # What the commands answer: tests/signal/test_gateway.py runs them against a signal server.
    assert "'http://127.0.0.1:3000/healthz'" in services["identity"]["healthcheck"]["test"][3]
    signal = services["signal"]["healthcheck"]["test"][3]
    assert "/v1/api/signal/health" in signal and "for port in (3000, 3001)" in signal  # REST and /stream's server (spec 8)
    assert services["migrate"]["healthcheck"] == {"disable": True}
    routed = {service.name for service in all_services()}
    assert services["gateway"]["depends_on"] == {name: {"condition": "service_healthy"} for name in routed}


def test_compose_points_every_service_to_service_url_at_the_siblings_container():
    """Their defaults (under SERVICE_BASE_URL) name 127.0.0.1:8000, nothing inside a container;
    tests/checkout/test_split_topology.py runs the platform with these URLs (hosts rewritten)."""
    assert compose_service_urls() == {
        "IDENTITY_JWKS_URL": "http://identity:3000/jw-certs",
        "COMMERCE_INVENTORY_URL": "http://inventory:3000/v1/api/inventory",
        "COMMERCE_TAXATION_URL": "http://taxation:3000/v1/api/taxation",
        "COMMERCE_PAYMENT_URL": "http://payment:3000/v1/api/payment",
        "COMMERCE_PAYMENT_WEBHOOK_URL": "http://commerce:3000/v1/api/commerce/payment-webhooks",
        "COMMERCE_FINANCE_URL": "http://finance:3000/v1/api/finance",
        "PAYMENT_FINANCE_URL": "http://finance:3000/v1/api/finance",
        "TAXATION_COMMERCE_URL": "http://commerce:3000/v1/api/commerce",
        "LEDGER_FINANCE_URL": "http://finance:3000/v1/api/finance",
        "ADMIN_COMMERCE_URL": "http://commerce:3000/v1/api/commerce",
    }


def test_compose_has_the_real_components_and_the_gateway():
    services = COMPOSE["services"]
    assert "wal_level=logical" in " ".join(services["postgres"]["command"])
    assert {"postgres", "redis", "kafka", "s3", "migrate", "gateway"} <= services.keys()
    assert services["migrate"]["environment"]["RUN_MODE"] == "migrate"
    assert any("split.conf" in volume for volume in services["gateway"]["volumes"])


def test_dockerfile_runs_serve_as_a_non_root_user():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert dockerfile.startswith("# syntax=") or "FROM python:3.11-slim" in dockerfile
    assert re.search(r"^USER (?!root)\w+", dockerfile, re.M)
    assert 'ENTRYPOINT ["python", "manage.py", "serve"]' in dockerfile


@pytest.mark.parametrize("service", all_services(), ids=lambda service: service.name)
def test_readme_lists_each_service_with_its_prefix_and_worker_id(service):
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"^\| {service.name} \| `{re.escape(service.prefix)}` \|.*\| {service.worker_id}\b", readme, re.M)


def test_readme_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "scripts/run" in first_block
    assert "scripts/test" in first_block
