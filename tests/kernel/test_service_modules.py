"""The modules of a service the kernel loads by name, not by import: `apps.<name>.apps` (the
registry), `<module>.urls` (merchant_platform/urls.py), the root URLconf a service declares,
`<module>.seeds` (merchant_platform/seeds.py), `<module>.routing` (merchant_platform/routing.py and
`serve`), `<module>.cdc` (merchant_platform/cdc/captures.py), `<module>.tasks` (Celery's
autodiscovery and `serve`) and `<module>.consumers` (the consumer registry's autodiscovery).

The kernel skips an optional module it does not find, so a renamed one would only be missed in
production: each service's set of them is pinned here, and each module is checked for what the
kernel reads from it."""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec

import pytest
from django.urls import URLPattern, URLResolver

from merchant_platform.cdc import Capture
from merchant_platform.cdc.captures import service_captures
from merchant_platform.celery import app as celery_app
from merchant_platform.messaging.registry import registered_consumers
from merchant_platform.registry import SERVICE_APPS, all_services

OPTIONAL = ("seeds", "routing", "cdc", "tasks", "consumers")
PROVIDED = {
    "identity": {"seeds", "tasks"},
    "commerce": {"seeds", "cdc", "tasks", "consumers"},
    "finance": {"seeds", "consumers"},
    "inventory": {"seeds", "tasks", "consumers"},
    "ledger": {"seeds", "tasks", "consumers"},
    "licensing": {"seeds", "tasks"},
    "outreach": {"seeds"},
    "payment": {"seeds", "tasks"},
    "signal": {"routing", "consumers"},
    "taxation": {"seeds", "consumers"},
}
SERVICES = {service.name: service for service in all_services()}


def test_every_registered_service_is_pinned_here():
    assert set(PROVIDED) == set(SERVICE_APPS) == set(SERVICES)


@pytest.mark.parametrize("name", SERVICE_APPS)
def test_the_service_provides_the_optional_modules_the_kernel_looks_for(name):
    module = SERVICES[name].module
    assert {part for part in OPTIONAL if find_spec(f"{module}.{part}") is not None} == PROVIDED[name]


@pytest.mark.parametrize("name", SERVICE_APPS)
def test_the_urls_and_any_root_urlconf_hold_url_patterns(name):
    service = SERVICES[name]
    for urlconf in filter(None, (f"{service.module}.urls", service.root_urlconf)):
        patterns = import_module(urlconf).urlpatterns
        assert patterns, urlconf
        assert all(isinstance(pattern, URLPattern | URLResolver) for pattern in patterns), urlconf


@pytest.mark.parametrize("name", [name for name in SERVICE_APPS if "seeds" in PROVIDED[name]])
def test_seeds_define_run(name):
    assert callable(import_module(f"{SERVICES[name].module}.seeds").run)


@pytest.mark.parametrize("name", [name for name in SERVICE_APPS if "routing" in PROVIDED[name]])
def test_routing_declares_websocket_routes(name):
    patterns = import_module(f"{SERVICES[name].module}.routing").websocket_urlpatterns
    assert patterns and all(isinstance(pattern, URLPattern) for pattern in patterns)


@pytest.mark.parametrize("name", [name for name in SERVICE_APPS if "cdc" in PROVIDED[name]])
def test_cdc_declares_captures_of_existing_tables(name):
    captures = service_captures(SERVICES[name])
    assert captures and all(isinstance(capture, Capture) for capture in captures)
    assert all(capture.table_name() for capture in captures)  # a model that does not exist raises


@pytest.mark.parametrize("name", [name for name in SERVICE_APPS if "tasks" in PROVIDED[name]])
def test_tasks_register_celery_tasks(name):
    module = import_module(f"{SERVICES[name].module}.tasks")
    registered = {task.name for task in celery_app.tasks.values() if task.__module__ == module.__name__}
    assert registered


def test_every_periodic_task_names_a_registered_task():
    celery_app.loader.import_default_modules()  # the autodiscovered tasks modules, as a worker or beat loads them
    scheduled = {entry["task"] for entry in celery_app.conf.beat_schedule.values()}
    assert scheduled and scheduled <= set(celery_app.tasks)


@pytest.mark.parametrize("name", [name for name in SERVICE_APPS if "consumers" in PROVIDED[name]])
def test_consumers_register_handlers_of_the_service(name):
    specs = registered_consumers(services={name})
    assert specs
    assert {spec.handler.__module__ for spec in specs} == {f"{SERVICES[name].module}.consumers"}
