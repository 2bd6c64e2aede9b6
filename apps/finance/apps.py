"""finance: Per-merchant accounts, vouchers and ledger transactions."""

from merchant_platform.registry import BROKER, DATABASE, REDIS, ServiceAppConfig


class FinanceConfig(ServiceAppConfig):
    name = "apps.finance"
    label = "finance"
    verbose_name = "Finance"
    prefix = "/v1/api/finance"
    external_port = 31040
    worker_id = 4
    schemas = ("finance",)
    dependencies = (
        DATABASE,
        REDIS,
        BROKER,
    )
    broker_required = True
