"""Database routing: each service app reads and writes through its own alias (its own schema)."""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connections, reset_queries
from django.db.backends.signals import connection_created

from merchant_platform.registry import service_for_app_label


def alias_for_app(app_label: str) -> str:
    """The service's alias for a service app; DATABASE_APP_ALIASES maps other apps (the test suite's
    sample app) to an alias; everything else lives on `default`."""
    service = service_for_app_label(app_label)
    if service:
        return service.db_alias
    return settings.DATABASE_APP_ALIASES.get(app_label, "default")


class ServiceRouter:
    """Send a service's models to the service's alias and keep everything else on `default`."""

    def db_for_read(self, model, **hints):
        return alias_for_app(model._meta.app_label)

    def db_for_write(self, model, **hints):
        return alias_for_app(model._meta.app_label)

    def allow_relation(self, obj1, obj2, **hints):
        return alias_for_app(obj1._meta.app_label) == alias_for_app(obj2._meta.app_label)

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == alias_for_app(app_label)


def ensure_schemas(alias: str, schemas: tuple[str, ...]) -> None:
    """Create the service's schemas if they do not exist (idempotent)."""
    with connections[alias].cursor() as cursor:
        for schema in schemas:
            cursor.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


_request_connections = threading.local()


def _forget_opened_connections(**kwargs) -> None:
    _request_connections.opened = []


def _remember_opened_connection(sender, connection, **kwargs) -> None:
    opened = getattr(_request_connections, "opened", None)
    if opened is not None:
        opened.append(connection)


def _release_opened_connections(**kwargs) -> None:
    opened = getattr(_request_connections, "opened", None)
    _request_connections.opened = None
    for connection in opened or ():
        connection.close_if_unusable_or_obsolete()


def release_request_connections_only(databases: dict, *, debug: bool) -> bool:
    """Replace Django's per-request connection handling by its cheaper equivalent when no connection
    outlives a request.

    Django visits every database alias at both ends of a request (`close_old_connections` at the
    start and the end, `reset_queries` for DEBUG's query log at the start). With eleven aliases each
    visit is a measurable share of a small request (docs/performance.md). When no alias keeps a
    connection across requests (CONN_MAX_AGE 0, which psycopg's pool requires) and DEBUG is off,
    the connections to release at the end of a request are exactly those the request opened (every
    earlier request released its own), and there is nothing to do at its start. So this records the
    connections opened during the request (Django's `connection_created` signal, per thread as
    Django's connections are) and releases those, to the pool, when it finishes. Django's test
    client keeps the connections a test opened before its request, as it always did. Returns
    whether the replacement was made."""
    if debug or any(database.get("CONN_MAX_AGE", 0) != 0 for database in databases.values()):
        return False
    request_started.disconnect(close_old_connections)
    request_started.disconnect(reset_queries)
    request_finished.disconnect(close_old_connections)
    request_started.connect(_forget_opened_connections, dispatch_uid="merchant_platform.db.forget")
    connection_created.connect(_remember_opened_connection, dispatch_uid="merchant_platform.db.remember")
    request_finished.connect(_release_opened_connections, dispatch_uid="merchant_platform.db.release")
    return True
