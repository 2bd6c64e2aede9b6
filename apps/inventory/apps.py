"""inventory: Stock per item and location, tracking, tickets, purchase orders."""

from merchant_platform.registry import BROKER, DATABASE, REDIS, ServiceAppConfig


class InventoryConfig(ServiceAppConfig):
    name = "apps.inventory"
    label = "inventory"
    verbose_name = "Inventory"
    prefix = "/v1/api/inventory"
    external_port = 31050
    worker_id = 5
    schemas = ("inventory",)
    dependencies = (
        DATABASE,
        REDIS,
        BROKER,
    )
    # Spec 1.3, Redis optional: docs/services/inventory.md, "Without Redis".
    optional_dependencies = (REDIS,)
    broker_required = True
