"""taxation: Tax groups, tax sets and tax provisioning of products."""

from merchant_platform.registry import BROKER, DATABASE, ServiceAppConfig


class TaxationConfig(ServiceAppConfig):
    name = "apps.taxation"
    label = "taxation"
    verbose_name = "Taxation"
    prefix = "/v1/api/taxation"
    external_port = 31032
    worker_id = 13
    schemas = ("taxation",)
    dependencies = (
        DATABASE,
        BROKER,
    )
    worker_id_env = "APP_ENV_SNOWFLAKE_WORKER_ID"
