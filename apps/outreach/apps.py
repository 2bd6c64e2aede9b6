"""outreach: Public inquiries and subscriptions, operator CRUD, statistics."""

from merchant_platform.registry import DATABASE, REDIS, ServiceAppConfig


class OutreachConfig(ServiceAppConfig):
    name = "apps.outreach"
    label = "outreach"
    verbose_name = "Outreach"
    prefix = "/v1/api/outreach"
    external_port = None
    worker_id = 10
    schemas = ("outreach",)
    dependencies = (
        DATABASE,
        REDIS,
    )
    doc_aliases = (("doc", "ui"),)
