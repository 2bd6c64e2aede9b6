"""payment: Payment transactions, attempts, provider IPN and webhooks."""

from merchant_platform.registry import BROKER, DATABASE, REDIS, ServiceAppConfig


class PaymentConfig(ServiceAppConfig):
    name = "apps.payment"
    label = "payment"
    verbose_name = "Payment"
    prefix = "/v1/api/payment"
    external_port = 31080
    worker_id = 8
    schemas = ("payment",)
    root_urlconf = "apps.payment.root_urls"
    dependencies = (
        DATABASE,
        REDIS,
        BROKER,
    )

    def ready(self) -> None:
        from apps.payment import metrics  # noqa: F401 (registers the pending-queue gauge)
