"""licensing: Licenses, activation seats and signed license certificates."""

from merchant_platform.registry import DATABASE, REDIS, ServiceAppConfig


class LicensingConfig(ServiceAppConfig):
    name = "apps.licensing"
    label = "licensing"
    verbose_name = "Licensing"
    prefix = "/v1/api/licensing"
    external_port = 31120
    worker_id = 11
    schemas = ("licensing",)
    dependencies = (
        DATABASE,
        REDIS,
    )
    application_secret_required = False  # spec 7: without it, warn and skip certificate publication

    def ready(self) -> None:
        from apps.licensing.certificates import log_configuration_warnings

        log_configuration_warnings()
