"""Commerce's product change stream (spec 6.2; the contract: docs/events.md, "Commerce change
streams"): a live product with a `tax_group_id` is provisioned with that group, a product whose
`tax_group_id` became null, soft-deleted or hard-deleted is deprovisioned.

The offset reset is `latest` as the spec says (no backfill on a new group); `manage.py resync_tax`
backfills on purpose. The runner drops a replayed message by its change id (idempotent=True), and
provisioning itself is idempotent (ALREADY_PROVISIONED / NOT_PROVISIONED), so a snapshot or a replayed
slot applies once. A message that cannot be applied (not a change event, no id, a group that does
not exist or has no items) raises: retried, then parked on the DLQ for an operator. A change naming
the product under another merchant than the one taxation recorded, or another merchant's tax group,
is parked at once with the reason (a record's merchant never changes through a change event)."""

from __future__ import annotations

from apps.taxation import services
from merchant_platform.cdc import parse_change_event
from merchant_platform.messaging import Message, consumer, topics
from merchant_platform.messaging.messages import UndecodableMessage

CONSUMER = "taxation.product-changes"


def _id(row: dict, column: str, *, nullable: bool = False) -> int | None:
    value = row.get(column)
    if nullable and value is None:
        return None
    if type(value) is not int or value <= 0:
        raise ValueError(f"product change: {column} is not a positive integer id: {value!r}")
    return value


@consumer(CONSUMER, topics=[topics.PRODUCT_CHANGES], offset_reset="latest")
def product_changed(message: Message) -> None:
    event = parse_change_event(message.value)
    if event is None:  # the tombstone after a hard delete (the "d" event before it deprovisioned)
        return
    row = event.row  # `after`, or `before` for op "d"
    try:
        services.product_apply(
            product_id=_id(row, "id"),
            merchant_id=_id(row, "merchant_id"),
            tax_group_id=_id(row, "tax_group_id", nullable=True),
            live=event.op != "d" and row.get("deleted_at") is None,
        )
    except services.ForeignMerchant as exc:
        raise UndecodableMessage(f"{exc.code}: {exc.detail}") from exc
