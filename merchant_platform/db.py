"""Database routing: each service app reads and writes through its own alias (its own schema)."""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connections, models, reset_queries
from django.db.backends.signals import connection_created
from django.utils import timezone

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


# Fields whose Python value psycopg writes as the column expects (Django's preparation of them is
# the identity, or a check of naive datetimes); any other field goes through get_db_prep_save.
_WRITTEN_AS_IS = (
    models.IntegerField,
    models.BigIntegerField,
    models.CharField,
    models.TextField,
    models.BooleanField,
    models.UUIDField,
    models.DateField,
    models.ForeignKey,
)


def copy_insert(objs: list[models.Model], *, using: str) -> list[models.Model]:
    """Insert new instances of one model with one `COPY ... FROM STDIN`: bulk_create's effect (ids
    given by the instances or by the column's default, auto_now fields set, INSERT triggers and
    constraints fire, errors raised as Django's), without its per-value preparation and client-side
    quoting, which dominate a large bulk_create (docs/performance.md, inventory). A column the
    instances leave None with a database default (an AutoField) is left to the database and stays
    None on the instances."""
    if not objs:
        return objs
    model = type(objs[0])
    connection = connections[using]
    now = timezone.now()
    fields = []
    for field in model._meta.concrete_fields:
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            for obj in objs:
                setattr(obj, field.attname, now)
        elif field.primary_key and field.db_returning and all(getattr(obj, field.attname) is None for obj in objs):
            continue
        fields.append(field)
    as_is = [isinstance(field, _WRITTEN_AS_IS) for field in fields]
    getters = [field.attname for field in fields]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    statement = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN"
    with connection.wrap_database_errors, connection.cursor() as cursor, cursor.copy(statement) as copy:
        for obj in objs:
            copy.write_row(
                [
                    getattr(obj, name) if plain else field.get_db_prep_save(getattr(obj, name), connection)
                    for name, plain, field in zip(getters, as_is, fields, strict=True)
                ]
            )
    for obj in objs:
        obj._state.adding, obj._state.db = False, using
    return objs


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
