"""Test setup against the real PostgreSQL and Redis.

Django's test runner sees every service alias as a duplicate of `default` (same server, same name)
and migrates only `default`; this fixture then creates each service's schemas and migrates its alias
itself (docs/architecture.md section 3), and closes every connection before the test database is dropped.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections

from merchant_platform.db import ensure_schemas
from merchant_platform.registry import active_services, get_service

pytest_plugins = [
    "tests.support.auth",
    "tests.support.broker",
    "tests.support.processes",
    "tests.support.cdc",
    "tests.support.consumers",
    "tests.support.logs",
]


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker, django_db_keepdb, django_db_modify_db_settings):
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        config = setup_databases(verbosity=0, interactive=False, keepdb=django_db_keepdb)
        for service in active_services():
            ensure_schemas(service.db_alias, service.schemas)
            call_command("migrate", database=service.db_alias, verbosity=0, interactive=False)
    yield
    with django_db_blocker.unblock():
        connections.close_all()
        if not django_db_keepdb:
            teardown_databases(config, verbosity=0)


@pytest.fixture(autouse=True)
def no_request_id_bound():
    """Each test starts with no request id bound in its thread, whatever an earlier test (a consumer
    or task run in-process) left bound there."""
    from merchant_platform.context import bind_request_id, reset_request_id

    token = bind_request_id(None)
    yield
    reset_request_id(token)


@pytest.fixture
def seeded(request):
    """The seeds of the service under test: the one naming the test's directory, tests/<service>/."""
    service = get_service(request.path.relative_to(Path(__file__).parent).parts[0])
    import_module(f"{service.module}.seeds").run()
