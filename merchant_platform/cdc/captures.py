"""Which tables a service captures, and the topic of each.

A capturing service declares them in `apps/<service>/cdc.py`:

    from merchant_platform.cdc import Capture
    from merchant_platform.messaging.topics import CHANGE_STREAMS

    CAPTURES = [Capture(topic=CHANGE_STREAMS["MERCHANT"].name, model="commerce.Merchant")]
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec

from merchant_platform.registry import Service


@dataclass(frozen=True)
class Capture:
    """A captured table: `model` ("app_label.Model") or `table` ("schema.table", or a bare name
    resolved through the alias's search_path), and the topic its change events go to."""

    topic: str
    table: str | None = None
    model: str | None = None

    def __post_init__(self):
        if (self.table is None) == (self.model is None):
            raise ValueError("a Capture names exactly one of table or model")

    def table_name(self) -> str:
        if self.table:
            return self.table
        from django.apps import apps

        return apps.get_model(self.model)._meta.db_table


def service_captures(service: Service) -> list[Capture]:
    module_name = f"{service.module}.cdc"
    if find_spec(module_name) is None:
        return []
    return list(import_module(module_name).CAPTURES)


def default_slot_name(service: Service) -> str:
    return f"mp_cdc_{service.name}"
