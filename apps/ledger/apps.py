"""ledger: Asynchronous, encrypted merchant ledger documents."""

from merchant_platform.registry import BROKER, DATABASE, REDIS, STORAGE, ServiceAppConfig


class LedgerConfig(ServiceAppConfig):
    name = "apps.ledger"
    label = "ledger"
    verbose_name = "Ledger"
    prefix = "/v1/api/ledger"
    external_port = 31060
    worker_id = 6
    schemas = ("ledger",)
    dependencies = (
        DATABASE,
        REDIS,
        BROKER,
        STORAGE,
    )
