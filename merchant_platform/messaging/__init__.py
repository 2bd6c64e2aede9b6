"""Kafka messaging for every service (docs/events.md).

    from merchant_platform.messaging import publish, consumer, Message, topics

- `publish(topic, payload, event_type=..., using=<alias>, key=...)`: an event tied to a database
  change, through the service's transactional outbox (sent once the change commits, never lost);
  `publish_many(topic, [(key, payload), ...], ...)` writes several in one INSERT, and
  `publish_all([Outgoing(topic, payload, event_type, key), ...], using=...)` several of any topics.
- `send_event(...)`: publish now and wait for the acknowledgement (no transaction behind it).
- `@consumer(name, topics=[...])`: register a handler; `manage.py consume` runs it.
- `claim_message(...)`: the idempotency record, for handlers that manage their own transaction.

Names are resolved lazily so that importing the package does not need the app registry.
"""

from importlib import import_module

_EXPORTS = {
    "publish": "merchant_platform.messaging.outbox",
    "publish_many": "merchant_platform.messaging.outbox",
    "publish_all": "merchant_platform.messaging.outbox",
    "Outgoing": "merchant_platform.messaging.outbox",
    "OutboxRelay": "merchant_platform.messaging.outbox",
    "send_event": "merchant_platform.messaging.producer",
    "PublishError": "merchant_platform.messaging.producer",
    "consumer": "merchant_platform.messaging.registry",
    "ConsumerSpec": "merchant_platform.messaging.registry",
    "Message": "merchant_platform.messaging.messages",
    "claim_message": "merchant_platform.messaging.idempotency",
    "claim_messages": "merchant_platform.messaging.idempotency",
    "OutboxMessageBase": "merchant_platform.messaging.models",
    "ProcessedMessageBase": "merchant_platform.messaging.models",
}

__all__ = [
    "ConsumerSpec",
    "Message",
    "OutboxMessageBase",
    "OutboxRelay",
    "Outgoing",
    "ProcessedMessageBase",
    "PublishError",
    "claim_message",
    "claim_messages",
    "consumer",
    "publish",
    "publish_all",
    "publish_many",
    "send_event",
    "topics",
]


def __getattr__(name: str):
    if name == "topics":
        return import_module("merchant_platform.messaging.topics")
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
