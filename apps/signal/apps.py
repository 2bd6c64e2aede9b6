"""signal: Notifications over REST and the encrypted WebSocket."""

from merchant_platform.registry import BROKER, DATABASE, REDIS, ServiceAppConfig


class SignalConfig(ServiceAppConfig):
    name = "apps.signal"
    label = "signal"
    verbose_name = "Signal"
    prefix = "/v1/api/signal"
    external_port = 31090
    worker_id = 9
    schemas = ("signal",)
    dependencies = (
        DATABASE,
        REDIS,
        BROKER,
    )
    doc_aliases = (("doc", "ui"), ("explorer", "redoc"), ("openapi.json", "schema"))
