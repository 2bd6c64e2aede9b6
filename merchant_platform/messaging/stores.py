"""Find the outbox and processed-message tables of a database alias (a service's schema)."""

from __future__ import annotations

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import router

from merchant_platform.messaging.models import OutboxMessageBase, ProcessedMessageBase
from merchant_platform.registry import all_services


def _model_for(base: type, alias: str, declaration: str):
    candidates = [model for model in apps.get_models() if issubclass(model, base) and router.db_for_write(model) == alias]
    if len(candidates) > 1:
        owners = {service.app_label for service in all_services() if service.db_alias == alias}
        candidates = [model for model in candidates if model._meta.app_label in owners] or candidates
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ImproperlyConfigured(
            f"no {base.__name__} subclass is routed to the database alias {alias!r}: declare "
            f"`class {declaration}({base.__name__}): ...` in the service's models.py and make its migration"
        )
    raise ImproperlyConfigured(
        f"several {base.__name__} subclasses are routed to {alias!r}: {', '.join(m._meta.label for m in candidates)}"
    )


def outbox_model_for(alias: str) -> type[OutboxMessageBase]:
    return _model_for(OutboxMessageBase, alias, "OutboxMessage")


def processed_model_for(alias: str) -> type[ProcessedMessageBase]:
    return _model_for(ProcessedMessageBase, alias, "ProcessedMessage")


def _models(base: type, aliases: set[str] | None) -> list:
    found = [model for model in apps.get_models() if issubclass(model, base)]
    return [model for model in found if aliases is None or router.db_for_write(model) in aliases]


def outbox_models(aliases: set[str] | None = None) -> list[type[OutboxMessageBase]]:
    """Every outbox table of this process (optionally only those of the given aliases)."""
    return _models(OutboxMessageBase, aliases)


def processed_models(aliases: set[str] | None = None) -> list[type[ProcessedMessageBase]]:
    """Every processed-message table of this process (optionally only those of the given aliases)."""
    return _models(ProcessedMessageBase, aliases)
