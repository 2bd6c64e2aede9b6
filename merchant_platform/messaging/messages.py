"""What travels on a topic: a JSON value, a string key, and string headers.

Headers every event carries: `messageId` (what consumers de-duplicate on), `eventType`, `source`
(the publishing service), `timestamp` (epoch milliseconds), `requestId` (when the publisher had one)
and `contentType`.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property

from django.core.serializers.json import DjangoJSONEncoder

MESSAGE_ID = "messageId"
EVENT_TYPE = "eventType"
SOURCE = "source"
TIMESTAMP = "timestamp"
REQUEST_ID = "requestId"
CONTENT_TYPE = "contentType"
JSON_CONTENT_TYPE = "application/json"


def encode_value(payload) -> bytes:
    """JSON for the wire: datetimes, decimals and UUIDs as strings (Django's encoder)."""
    return json.dumps(payload, cls=DjangoJSONEncoder, separators=(",", ":")).encode()


def encode_key(key) -> bytes | None:
    return None if key is None else str(key).encode()


def event_headers(
    *, event_type: str, source: str, request_id: str | None, message_id: str | None = None, extra: dict | None = None
) -> dict[str, str]:
    headers = {
        MESSAGE_ID: message_id or uuid.uuid4().hex,
        EVENT_TYPE: event_type,
        SOURCE: source,
        TIMESTAMP: str(int(time.time() * 1000)),
        CONTENT_TYPE: JSON_CONTENT_TYPE,
    }
    if request_id:
        headers[REQUEST_ID] = request_id
    headers.update(extra or {})
    return headers


def wire_headers(headers: dict[str, str]) -> list[tuple[str, bytes]]:
    return [(name, str(value).encode()) for name, value in headers.items()]


class UndecodableMessage(ValueError):
    """The value is not JSON, or the message cannot be identified: no retry can fix it, so the
    runner parks it at once."""


@dataclass
class Message:
    """One consumed record, as handlers see it."""

    topic: str
    partition: int
    offset: int
    key: str | None
    raw_value: bytes | None
    headers: dict[str, str] = field(default_factory=dict)
    timestamp_ms: int | None = None

    @classmethod
    def from_record(cls, record) -> Message:
        headers = {name: (value or b"").decode(errors="replace") for name, value in (record.headers or [])}
        key = record.key.decode(errors="replace") if record.key is not None else None
        return cls(record.topic, record.partition, record.offset, key, record.value, headers, record.timestamp)

    @cached_property
    def value(self):
        """The decoded JSON value (None for a tombstone)."""
        if self.raw_value is None:
            return None
        try:
            return json.loads(self.raw_value)
        except ValueError as exc:
            raise UndecodableMessage(f"value is not JSON: {exc}") from exc

    @property
    def event_type(self) -> str | None:
        return self.headers.get(EVENT_TYPE)

    @property
    def request_id(self) -> str | None:
        return self.headers.get(REQUEST_ID)

    @property
    def position(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @cached_property
    def message_id(self) -> str:
        """What identifies this event across redeliveries and re-publications: the `messageId`
        header; for a change event (ours or Debezium's) its table, LSN and key; else its position."""
        if self.headers.get(MESSAGE_ID):
            return self.headers[MESSAGE_ID]
        from merchant_platform.cdc.envelope import change_event_id

        try:
            change_id = change_event_id(self.value, self.key)
        except UndecodableMessage:
            change_id = None
        except Exception as exc:  # a value shaped to trip the parser (an `op` that is a list...)
            raise UndecodableMessage(f"cannot identify the message: {type(exc).__name__}: {exc}") from exc
        return change_id or self.position
