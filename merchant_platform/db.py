"""Database routing: each service app reads and writes through its own alias (its own schema)."""

from __future__ import annotations

from django.conf import settings
from django.db import connections

from merchant_platform.services import service_for_app_label


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
