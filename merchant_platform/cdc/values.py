"""Column values as Debezium's PostgreSQL connector writes them to JSON, from PostgreSQL's text
output (what pgoutput and a text-mode SELECT give), for the configuration documented in
docs/events.md: decimal.handling.mode=string, time.precision.mode=adaptive (the default),
binary.handling.mode=base64."""

from __future__ import annotations

import base64
import math
from datetime import UTC, date, datetime, time
from decimal import Decimal

EPOCH_DATE = date(1970, 1, 1)
UNAVAILABLE = "__debezium_unavailable_value"  # Debezium's placeholder for an unchanged TOASTed value

BOOL, BYTEA, INT8, INT2, INT4, OID = 16, 17, 20, 21, 23, 26
FLOAT4, FLOAT8, NUMERIC = 700, 701, 1700
DATE, TIME, TIMESTAMP, TIMESTAMPTZ = 1082, 1083, 1114, 1184


def _float(text: str):
    value = float(text)
    return value if math.isfinite(value) else text  # JSON has no NaN/Infinity


def _timestamptz(text: str) -> str:
    """io.debezium.time.ZonedTimestamp: ISO-8601 in UTC with a Z (the relay's session is in UTC)."""
    if text in ("infinity", "-infinity"):
        return text
    moment = datetime.fromisoformat(text).astimezone(UTC)
    return moment.replace(tzinfo=None).isoformat() + "Z"


def _timestamp(text: str):
    """io.debezium.time.MicroTimestamp: microseconds since the epoch."""
    if text in ("infinity", "-infinity"):
        return text
    moment = datetime.fromisoformat(text)
    delta = moment - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _date(text: str):
    """io.debezium.time.Date: days since the epoch."""
    if text in ("infinity", "-infinity"):
        return text
    return (date.fromisoformat(text) - EPOCH_DATE).days


def _time(text: str) -> int:
    """io.debezium.time.MicroTime: microseconds since midnight."""
    moment = time.fromisoformat(text)
    return ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1_000_000 + moment.microsecond


def _bytea(text: str) -> str:
    return base64.b64encode(bytes.fromhex(text[2:])).decode()  # bytea_output=hex: \x0102...


CONVERTERS = {
    BOOL: lambda text: text in ("t", "true"),  # pgoutput writes t, a ::text cast true
    INT2: int,
    INT4: int,
    INT8: int,
    OID: int,
    FLOAT4: _float,
    FLOAT8: _float,
    NUMERIC: str,
    DATE: _date,
    TIME: _time,
    TIMESTAMP: _timestamp,
    TIMESTAMPTZ: _timestamptz,
    BYTEA: _bytea,
}


def convert(type_oid: int, text: str | None):
    """A column's text value as Debezium's JSON value (text, JSON, UUID... stay strings)."""
    if text is None:
        return None
    converter = CONVERTERS.get(type_oid)
    return converter(text) if converter else text


# Readers for consumers of change events (ours or Debezium's).
def as_datetime(value) -> datetime | None:
    """A ZonedTimestamp string or a MicroTimestamp number as an aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, int):
        return datetime.fromtimestamp(value / 1_000_000, tz=UTC)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def as_decimal(value) -> Decimal | None:
    return None if value is None else Decimal(str(value))
