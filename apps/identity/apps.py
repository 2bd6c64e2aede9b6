"""identity: Accounts, sign-in, one-time passwords and the JWKS."""

from merchant_platform.services import DATABASE, REDIS, ServiceAppConfig


class IdentityConfig(ServiceAppConfig):
    name = "apps.identity"
    label = "identity"
    verbose_name = "Identity"
    prefix = "/v1/api/identity"
    external_port = 31010
    worker_id = 1
    schemas = ("identity",)
    dependencies = (
        DATABASE,
        REDIS,
    )
