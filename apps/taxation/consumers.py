"""Commerce's product change stream (spec 6.2; the contract: docs/events.md, "Commerce change
streams"): a live product with a `tax_group_id` is provisioned with that group, a product whose
`tax_group_id` became null, soft-deleted or hard-deleted is deprovisioned.

The offset reset is `latest` as the spec says (no backfill on a new group); `manage.py resync_tax`
backfills on purpose. The runner drops a replayed message by its change id (idempotent=True), and
provisioning itself is idempotent (ALREADY_PROVISIONED / NOT_PROVISIONED), so a snapshot or a replayed
slot applies once. A message that cannot be applied (not a change event, no id, a group that does
not exist or has no items) raises: retried, then parked on the DLQ for an operator."""

from __future__ import annotations

from apps.taxation import services
from merchant_platform.cdc import parse_change_event
from merchant_platform.messaging import Message, consumer, topics

CONSUMER = "taxation.product-changes"


def apply_product(row: dict, *, deleted: bool = False, source: str = services.STREAM) -> services.Provisioning:
    """Provision or deprovision one product from its commerce row (the stream's or the API's)."""
    product_id, merchant_id = _id(row, "id"), _id(row, "merchant_id")
    tax_group_id = row.get("tax_group_id")
    if deleted or row.get("deleted_at") is not None or tax_group_id is None:
        return services.tax_set_deprovision(product_id=product_id, merchant_id=merchant_id, source=source)
    return services.tax_set_provision(product_id=product_id, tax_group_id=_id(row, "tax_group_id"), merchant_id=merchant_id, source=source)


def _id(row: dict, column: str) -> int:
    value = row.get(column)
    if type(value) is not int or value <= 0:
        raise ValueError(f"product change: {column} is not a positive integer id: {value!r}")
    return value


@consumer(CONSUMER, topics=[topics.PRODUCT_CHANGES], offset_reset="latest")
def product_changed(message: Message) -> None:
    event = parse_change_event(message.value)
    if event is None:  # the tombstone after a hard delete (the "d" event before it deprovisioned)
        return
    apply_product(event.row, deleted=event.op == "d")
