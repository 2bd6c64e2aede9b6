from django.apps import AppConfig
from django.conf import settings


class KernelConfig(AppConfig):
    name = "merchant_platform"
    verbose_name = "Merchant Platform kernel"

    def ready(self) -> None:
        from merchant_platform.db import skip_connection_checks_at_request_start

        skip_connection_checks_at_request_start(settings.DATABASES, debug=settings.DEBUG)
