"""Seeds: each service's `seeds.py` may define `run()`, which must be idempotent (spec 1.2.2)."""

from importlib import import_module
from importlib.util import find_spec

from merchant_platform.logging import get_logger
from merchant_platform.registry import active_services

log = get_logger(__name__)


def run_seeds() -> list[str]:
    seeded = []
    for service in active_services():
        if find_spec(f"{service.module}.seeds") is None:
            continue
        module = import_module(f"{service.module}.seeds")
        module.run()
        seeded.append(service.name)
        log.info("seed.done", service=service.name)
    return seeded
