"""Idempotent handling (spec 6.2): a handler records what it processed in the same transaction as
its effect, so a redelivered message finds the record and does nothing."""

from __future__ import annotations

from django.db import connections, transaction

from merchant_platform.messaging.stores import processed_model_for


def claim_messages(*, consumer: str, message_ids: list[str], using: str, model=None) -> set[str]:
    """Record `message_ids` as processed by `consumer`; return those not recorded before.

    Must run inside transaction.atomic(using=using): the records commit or roll back with the
    effects. A concurrent claim of the same id waits on the unique index until the first
    transaction ends, then finds the id taken, so two consumers never both apply one message.
    """
    if not message_ids:
        return set()
    if not transaction.get_connection(using).in_atomic_block:
        raise RuntimeError("claim_messages must run inside transaction.atomic(using=...) with the handler's effect")
    model = model or processed_model_for(using)
    connection = connections[using]
    table = connection.ops.quote_name(model._meta.db_table)
    placeholders = ", ".join(["(%s, %s, now())"] * len(message_ids))
    params = [value for message_id in message_ids for value in (consumer, message_id)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (consumer, message_id, processed_at) VALUES {placeholders} "  # noqa: S608  (quoted table name, values bound)
            "ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id",
            params,
        )
        return {row[0] for row in cursor.fetchall()}


def claim_message(*, consumer: str, message_id: str, using: str, model=None) -> bool:
    """True the first time `consumer` processes `message_id` (see claim_messages)."""
    return bool(claim_messages(consumer=consumer, message_ids=[message_id], using=using, model=model))
