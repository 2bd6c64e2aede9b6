"""The consumer registry: consumer name -> topics, group, handler and policies.

A service registers its handlers in its `consumers.py`:

    @consumer("inventory.payment-success", topics=[PAYMENT_SUCCESS], idempotent=True)
    def payment_success(message: Message) -> None: ...

The group defaults to the service's (SVC-00050-INVENTORY_CONSUMER_GROUP), the database alias to the
service's. `manage.py consume` imports every installed app's `consumers` module and runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.apps import apps
from django.utils.module_loading import autodiscover_modules

from merchant_platform.db import alias_for_app
from merchant_platform.messaging.config import consumer_group_id
from merchant_platform.registry import service_for_app_label

OFFSET_RESETS = ("earliest", "latest")


@dataclass(frozen=True)
class ConsumerSpec:
    """One consumer, in `group_id`: the runner gives each group one Kafka consumer (and thread)
    subscribed to its consumers' topics (merchant_platform/messaging/runner.py)."""

    name: str
    topics: tuple[str, ...]
    handler: Callable
    group_id: str
    alias: str
    service: str | None = None
    offset_reset: str = "earliest"
    idempotent: bool = True
    max_retries: int = 3
    retry_backoff_seconds: float = 0.5
    processed_model: type | None = None
    batch: bool = False

    def __post_init__(self):
        if self.offset_reset not in OFFSET_RESETS:
            raise ValueError(f"consumer {self.name}: offset_reset must be one of {OFFSET_RESETS}")
        if not self.topics:
            raise ValueError(f"consumer {self.name}: no topic")


_registry: dict[str, ConsumerSpec] = {}


def register(spec: ConsumerSpec) -> ConsumerSpec:
    existing = _registry.get(spec.name)
    if existing is not None and existing.handler is not spec.handler:
        raise ValueError(f"consumer {spec.name!r} is registered twice")
    _registry[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    _registry.pop(name, None)


def consumer(
    name: str,
    *,
    topics,
    group_id: str | None = None,
    offset_reset: str = "earliest",
    idempotent: bool = True,
    max_retries: int = 3,
    retry_backoff_seconds: float = 0.5,
    processed_model: type | None = None,
    batch: bool = False,
):
    """Register the decorated function `handler(message)` as consumer `name`.

    idempotent=True (the default) records each message id in the service's ProcessedMessage table
    in the handler's transaction and skips a message already recorded (spec 6.2).
    batch=True: `handler(messages)` gets a list (the new messages of one poll, in order); when it
    raises, each message is handled alone (a list of one), retried, and dead-lettered by itself.
    """

    def decorate(handler: Callable) -> Callable:
        app_config = apps.get_containing_app_config(handler.__module__)
        if app_config is None:
            raise ValueError(f"consumer {name}: {handler.__module__} is not in an installed app")
        service = service_for_app_label(app_config.label)
        if group_id is None and service is None:
            raise ValueError(f"consumer {name}: {app_config.label} is not a service; give group_id")
        register(
            ConsumerSpec(
                name=name,
                topics=tuple(str(topic) for topic in topics),
                handler=handler,
                group_id=group_id or consumer_group_id(service, name),
                alias=alias_for_app(app_config.label),
                service=service.name if service else None,
                offset_reset=offset_reset,
                idempotent=idempotent,
                max_retries=max_retries,
                retry_backoff_seconds=retry_backoff_seconds,
                processed_model=processed_model,
                batch=batch,
            )
        )
        return handler

    return decorate


def discover() -> None:
    """Import every installed app's `consumers` module (their decorators register)."""
    autodiscover_modules("consumers")


def registered_consumers(*, services: set[str] | None = None, names: set[str] | None = None) -> list[ConsumerSpec]:
    discover()
    specs = sorted(_registry.values(), key=lambda spec: spec.name)
    if names:
        unknown = names - {spec.name for spec in specs}
        if unknown:
            raise LookupError(f"unknown consumer(s): {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in specs) or 'none'}")
        specs = [spec for spec in specs if spec.name in names]
    if services:
        specs = [spec for spec in specs if spec.service in services]
    return specs
