"""commerce: Merchants, products, search sync and provider integrations."""

from merchant_platform.registry import BROKER, DATABASE, REDIS, STORAGE, ServiceAppConfig


class CommerceConfig(ServiceAppConfig):
    name = "apps.commerce"
    label = "commerce"
    verbose_name = "Commerce"
    prefix = "/v1/api/commerce"
    external_port = 31020
    worker_id = 2
    schemas = ("allocation", "public")
    dependencies = (
        DATABASE,
        REDIS,
        BROKER,
        STORAGE,
    )
