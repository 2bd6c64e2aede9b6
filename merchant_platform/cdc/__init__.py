"""Change data capture (docs/events.md): a relay from PostgreSQL's write-ahead log to Kafka that
writes Debezium change events, and the parser consumers use so Debezium can replace the relay."""

from merchant_platform.cdc.captures import Capture
from merchant_platform.cdc.envelope import ChangeEvent, InvalidChangeEvent, parse_change_event, parse_change_key
from merchant_platform.cdc.values import as_datetime, as_decimal

__all__ = ["Capture", "ChangeEvent", "InvalidChangeEvent", "as_datetime", "as_decimal", "parse_change_event", "parse_change_key"]
