"""Kafka consumers of commerce: the worker role's product change-stream consumer (spec 1.3, 1.4),
registered only where APP_ENV_WORKERS enables the worker role. It reads commerce's own PRODUCT and
PRODUCT_VARIANT streams (docs/events.md) and enqueues one sync of the products a poll's changes
concern on SYNC_PRODUCT_QUEUE; the sync reads the current rows, so duplicates and reordering are
harmless."""

from __future__ import annotations

from django.conf import settings

from apps.commerce.tasks import sync_products
from merchant_platform.cdc import parse_change_event
from merchant_platform.messaging import Message, consumer, topics


def product_of(message: Message) -> int | None:
    """The product a change concerns: the product's id, or a variant's primary product."""
    event = parse_change_event(message.value)
    if event is None or event.row is None:  # a tombstone after a hard delete
        return None
    row = event.row
    # By the row's table (as Debezium's envelope names it too), not the topic, which deployments rename.
    return int(row["primary_product_id"]) if event.table == "product_variant" else int(row["id"])


def products_changed(messages: list[Message]) -> None:
    product_ids = {product_of(message) for message in messages} - {None}
    if product_ids:
        # Enqueued before the offsets move (not after the handler's commit): a crash in between
        # then enqueues them again, which the idempotent sync absorbs; nothing is ever lost.
        sync_products.delay(sorted(product_ids))


if settings.APP_ENV_WORKERS:
    consumer(
        "commerce.product-search",
        topics=[topics.PRODUCT_CHANGES, topics.PRODUCT_VARIANT_CHANGES],
        batch=True,
    )(products_changed)
