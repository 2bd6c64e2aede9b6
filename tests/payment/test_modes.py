"""Modes (spec 1.4): FULL serves REST and runs the schedulers, API serves REST without schedulers,
WORKER serves no REST; WORKER number i takes snowflake worker id 91+i."""

from __future__ import annotations

import importlib

import pytest

from apps.payment import root_urls, tasks, urls
from settings.payment import payment_worker_node_id


@pytest.fixture
def reload_routes():
    yield
    importlib.reload(urls)
    importlib.reload(root_urls)


def test_a_worker_serves_no_rest_and_no_ipn(settings, reload_routes):
    settings.PAYMENT_MODE = "WORKER"
    assert importlib.reload(urls).urlpatterns == [] and importlib.reload(root_urls).urlpatterns == []
    settings.PAYMENT_MODE = "API"
    assert importlib.reload(urls).urlpatterns and len(importlib.reload(root_urls).urlpatterns) == 4


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
