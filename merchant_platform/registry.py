"""The service registry.

Each service app declares itself in its AppConfig (a `ServiceAppConfig`); this module is the one
place that lists the ten service apps and reads their declarations. Settings, URLs, the database
router, probes and commands ask the registry; nothing else hard-codes a prefix, a port, a worker id
or a schema.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from functools import cache

from django.apps import AppConfig

SERVICE_APPS = (
    "identity",
    "commerce",
    "finance",
    "inventory",
    "ledger",
    "taxation",
    "signal",
    "payment",
    "licensing",
    "outreach",
)

# What a readiness probe may check for a service.
DATABASE, REDIS, BROKER, STORAGE = "database", "redis", "broker", "storage"


@dataclass(frozen=True)
class Service:
    name: str
    prefix: str
    external_port: int | None
    worker_id: int
    schemas: tuple[str, ...]
    dependencies: tuple[str, ...]
    # Dependencies the service serves without (spec 1.3): readyz reports their failure as
    # "degraded", and the process leases its snowflake worker id in PostgreSQL too (redis_optional).
    optional_dependencies: tuple[str, ...] = ()
    broker_required: bool = False
    root_urlconf: str | None = None
    worker_id_env: str = "APP_ENV_NODE_ID"
    openapi: bool = True
    # Extra documentation routes under the prefix: path -> "ui", "redoc" or "schema" (spec 4.1).
    doc_aliases: tuple[tuple[str, str], ...] = ()
    # Whether the service cannot work without APP_ENV_APPLICATION_SECRET (production then refuses
    # to start without it); licensing only warns and skips certificate publication (spec 7).
    application_secret_required: bool = True

    @property
    def app_label(self) -> str:
        return self.name

    @property
    def module(self) -> str:
        return f"apps.{self.name}"

    @property
    def db_alias(self) -> str:
        return self.name

    @property
    def schema(self) -> str:
        """The schema the service's alias works in (its migrations table lives there too)."""
        return self.schemas[0]


class ServiceAppConfig(AppConfig):
    """AppConfig of a service: the class attributes are the service's declaration."""

    # Each apps.py imports this base too; Django picks the one config marked default.
    default = False
    default_auto_field = "django.db.models.BigAutoField"
    prefix: str
    external_port: int | None = None
    worker_id: int
    schemas: tuple[str, ...]
    dependencies: tuple[str, ...] = (DATABASE, REDIS)
    optional_dependencies: tuple[str, ...] = ()
    broker_required: bool = False
    root_urlconf: str | None = None
    worker_id_env: str = "APP_ENV_NODE_ID"
    openapi: bool = True
    doc_aliases: tuple[tuple[str, str], ...] = ()
    application_secret_required: bool = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.default = True

    @classmethod
    def declaration(cls) -> Service:
        return Service(
            name=cls.label,
            prefix=cls.prefix,
            external_port=cls.external_port,
            worker_id=cls.worker_id,
            schemas=tuple(cls.schemas),
            dependencies=tuple(cls.dependencies),
            optional_dependencies=tuple(cls.optional_dependencies),
            broker_required=cls.broker_required,
            root_urlconf=cls.root_urlconf,
            worker_id_env=cls.worker_id_env,
            openapi=cls.openapi,
            doc_aliases=tuple(cls.doc_aliases),
            application_secret_required=cls.application_secret_required,
        )


def _config_class(name: str) -> type[ServiceAppConfig]:
    module = importlib.import_module(f"apps.{name}.apps")
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, ServiceAppConfig) and value is not ServiceAppConfig:
            return value
    raise LookupError(f"apps/{name}/apps.py declares no ServiceAppConfig")


@cache
def all_services() -> tuple[Service, ...]:
    """Every service, in the registry's order. Safe to call before Django is set up."""
    return tuple(_config_class(name).declaration() for name in SERVICE_APPS)


def get_service(name: str) -> Service:
    for service in all_services():
        if service.name == name:
            return service
    raise LookupError(f"unknown service {name!r}; known: {', '.join(SERVICE_APPS)}")


def selected_service_name() -> str | None:
    """APP_SERVICE selects split mode; unset or 'all' means all-in-one."""
    value = os.environ.get("APP_SERVICE", "").strip().lower()
    return None if value in ("", "all") else value


@cache
def active_services() -> tuple[Service, ...]:
    """The services this process serves: one in split mode, every one in all-in-one mode."""
    name = selected_service_name()
    return all_services() if name is None else (get_service(name),)


def is_all_in_one() -> bool:
    return selected_service_name() is None


def redis_optional() -> bool:
    """Whether every service this process serves runs without Redis (inventory, spec 1.3)."""
    return all(REDIS in service.optional_dependencies for service in active_services())


def service_for_app_label(app_label: str) -> Service | None:
    for service in all_services():
        if service.app_label == app_label:
            return service
    return None
