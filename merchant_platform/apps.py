from django.apps import AppConfig
from django.conf import settings


class KernelConfig(AppConfig):
    name = "merchant_platform"
    verbose_name = "Merchant Platform kernel"

    def ready(self) -> None:
        from merchant_platform.db import release_request_connections_only

        release_request_connections_only(settings.DATABASES, debug=settings.DEBUG)
