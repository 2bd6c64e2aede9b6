"""Modes (spec 1.4): FULL serves REST and runs the schedulers, API serves REST without schedulers,
WORKER serves no REST; WORKER number i takes snowflake worker id 91+i; FULL is for development only."""

from __future__ import annotations

import importlib

import pytest

from apps.payment import root_urls, tasks, urls
from settings.payment import payment_worker_node_id
from tests.kernel.conftest import manage_command, run_all
from tests.kernel.test_commands import PRODUCTION_SECRETS


@pytest.fixture
def reload_routes():
    yield
    importlib.reload(urls)
    importlib.reload(root_urls)


def test_a_worker_serves_no_rest_and_no_ipn(settings, reload_routes):
    settings.PAYMENT_MODE = "WORKER"
    assert importlib.reload(urls).urlpatterns == [] and importlib.reload(root_urls).urlpatterns == []
    settings.PAYMENT_MODE = "API"
    assert importlib.reload(urls).urlpatterns and len(importlib.reload(root_urls).urlpatterns) == 5  # 4 IPNs, the refund callback


def test_api_mode_runs_no_scheduler():
    assert tasks.periodic_tasks("API") == []
    full = {name for name, _ in tasks.periodic_tasks("FULL")}
    assert full == {name for name, _ in tasks.periodic_tasks("WORKER")}
    assert {
        "apps.payment.tasks.expire_attempts",
        "apps.payment.tasks.resolve_unknown_attempts",
        "apps.payment.tasks.deliver_due_webhooks",
    } <= full


def test_worker_number_i_takes_worker_id_91_plus_i():
    assert payment_worker_node_id("WORKER", 0, None) == "91"
    assert payment_worker_node_id("WORKER", 3, "94") == "94"
    assert payment_worker_node_id("FULL", None, None) is None and payment_worker_node_id("API", 2, None) is None
    for args in [("WORKER", 3, "8"), ("WORKER", None, None), ("WORKER", 2000, None)]:
        with pytest.raises(SystemExit):
            payment_worker_node_id(*args)


def test_a_split_payment_process_serves_the_roles_of_its_mode(tmp_path):
    """Settings of a split process (APP_SERVICE=payment) in each mode: its worker id and serve roles."""
    import json
    import os
    import subprocess
    import sys

    probe = "import json, os, django; django.setup(); print(json.dumps([os.environ.get('APP_ENV_NODE_ID'), os.environ.get('SERVE_ROLES')]))"
    base = {k: v for k, v in os.environ.items() if k not in ("APP_ENV_NODE_ID", "SERVE_ROLES", "PAYMENT_MODE", "PAYMENT_WORKER_NUMBER")}
    base.update(APP_SERVICE="payment", DJANGO_SETTINGS_MODULE="settings.test")

    def run(**extra):
        return subprocess.run([sys.executable, "-c", probe], env={**base, **extra}, capture_output=True, text=True, check=False, timeout=60)

    def id_and_roles(result) -> list:
        assert result.returncode == 0, result.stderr[-500:]
        return json.loads(result.stdout.strip().splitlines()[-1])

    assert id_and_roles(run(PAYMENT_MODE="WORKER", PAYMENT_WORKER_NUMBER="2")) == ["93", "web,worker,beat,consume"]
    # serve's other programs get the variable set but empty (a free id), not 93 again.
    assert id_and_roles(run(PAYMENT_MODE="WORKER", PAYMENT_WORKER_NUMBER="2", APP_ENV_NODE_ID="", SERVE_ROLES="worker")) == ["", "worker"]
    assert id_and_roles(run(PAYMENT_MODE="API")) == [None, "web,consume"]
    clash = run(PAYMENT_MODE="WORKER", PAYMENT_WORKER_NUMBER="2", APP_ENV_NODE_ID="8")
    assert clash.returncode != 0 and "takes worker id 93" in clash.stderr


@pytest.mark.parametrize(("batch", "concurrency"), [("0", "16"), ("100", "0")])
def test_a_webhook_batch_setting_below_one_stops_the_process(batch, concurrency):
    import os
    import subprocess
    import sys

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "settings.test"}
    env.update(PAYMENT_WEBHOOK_BATCH_SIZE=batch, PAYMENT_WEBHOOK_SEND_CONCURRENCY=concurrency)
    completed = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode != 0
    assert f"PAYMENT_WEBHOOK_SEND_CONCURRENCY must be >= 1, got {batch} and {concurrency}" in completed.stderr


def test_a_production_process_running_payment_refuses_full_mode():
    """Where payment runs (its split process or all-in-one), APP_ENV=production refuses FULL, named
    or by default, with one line naming the setting and its values; API and WORKER start, and so do
    another service's process and a migration run, which serve no mode."""
    secrets = {name: f"test-value-for-{name.lower()}-0123456789abcdef0123456789abcdef" for name in PRODUCTION_SECRETS}
    production = {"APP_ENV": "production", **secrets}
    refused = {
        "split, FULL by default": {**production, "APP_SERVICE": "payment"},
        "split, FULL named": {**production, "APP_SERVICE": "payment", "PAYMENT_MODE": "full"},
        "all-in-one, FULL by default": production,
    }
    accepted = {
        "API": {**production, "APP_SERVICE": "payment", "PAYMENT_MODE": "API"},
        "WORKER": {**production, "APP_SERVICE": "payment", "PAYMENT_MODE": "WORKER", "PAYMENT_WORKER_NUMBER": "0"},
        "another service": {**production, "APP_SERVICE": "identity"},
        "a migration run": {**production, "RUN_MODE": "migrate"},
    }
    cases = {**refused, **accepted}
    results = dict(zip(cases, run_all(*((manage_command("check"), env) for env in cases.values())), strict=True))
    for case in refused:
        assert results[case].returncode != 0, case
        assert results[case].stderr.strip() == (
            "merchant-platform: PAYMENT_MODE=FULL (the default) is for development only; with APP_ENV=production run payment as "
            "PAYMENT_MODE=API and PAYMENT_MODE=WORKER processes (allowed values: FULL, API, WORKER); refusing to start"
        ), case
    for case in accepted:
        assert results[case].returncode == 0, (case, results[case].stderr[-2000:])
