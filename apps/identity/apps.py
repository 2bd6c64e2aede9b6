"""identity: Accounts, sign-in, one-time passwords and the JWKS."""

from merchant_platform.registry import DATABASE, REDIS, ServiceAppConfig


class IdentityConfig(ServiceAppConfig):
    # The module also holds ServiceAppConfig (imported): `default` makes Django pick this class.
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
    root_urlconf = "apps.identity.root_urls"

    def ready(self):
        from apps.identity import keys
        from merchant_platform.verification.jwks import jwks_cache

        # Where identity runs, the kernel's verifier reads the key ring itself instead of /jw-certs.
        jwks_cache.set_local_source(keys.public_jwks)

    def configuration_problem(self) -> str | None:
        """Checked by merchant_platform.lifecycle at every process start: no keypair, no start."""
        from apps.identity import keys

        return keys.configuration_problem()
