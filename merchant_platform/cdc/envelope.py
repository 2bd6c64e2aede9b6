"""Debezium change events: what the relay writes, and the parser consumers use.

A value is Debezium's envelope (https://debezium.io/documentation/reference/stable/connectors/postgresql.html#postgresql-events):
`{"before", "after", "source", "op", "ts_ms", "transaction"}`, with or without the JsonConverter's
`{"schema": ..., "payload": ...}` wrapper; `op` is c (create), u (update), d (delete), r (snapshot
read), t (truncate) or m (message). A delete is followed by a tombstone (null value) for log
compaction. The key is the row's primary key as a JSON object, e.g. `{"id": 42}`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

RELAY_VERSION = "merchant-platform-cdc-1"
OPERATIONS = {"c": "create", "u": "update", "d": "delete", "r": "read", "t": "truncate", "m": "message"}


class InvalidChangeEvent(ValueError):
    """The value is not a Debezium change event."""


@dataclass(frozen=True)
class ChangeEvent:
    op: str
    before: dict | None
    after: dict | None
    source: dict
    ts_ms: int | None
    transaction: dict | None = None

    @property
    def schema(self) -> str | None:
        return self.source.get("schema")

    @property
    def table(self) -> str | None:
        return self.source.get("table")

    @property
    def lsn(self) -> int | None:
        return self.source.get("lsn")

    @property
    def tx_id(self) -> int | None:
        return self.source.get("txId")

    @property
    def is_snapshot(self) -> bool:
        return self.op == "r"

    @property
    def is_delete(self) -> bool:
        return self.op == "d"

    @property
    def row(self) -> dict | None:
        """The row as it is now (after), or as it was for a delete (before)."""
        return self.before if self.op == "d" else self.after


def _json(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode()
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise InvalidChangeEvent(f"not JSON: {exc}") from exc
    return value


def _unwrap(value):
    """Drop the JsonConverter's schema wrapper (schemas.enable=true) if there is one."""
    if isinstance(value, dict) and "payload" in value and "schema" in value:
        return value["payload"]
    return value


def parse_change_event(value) -> ChangeEvent | None:
    """A Debezium change event from a message value (bytes, str or decoded JSON); None for a
    tombstone. Raises InvalidChangeEvent for anything else."""
    payload = _unwrap(_json(value))
    if payload is None:
        return None
    if not isinstance(payload, dict):
        raise InvalidChangeEvent("a change event is a JSON object")
    op = payload.get("op")
    if op not in OPERATIONS:
        raise InvalidChangeEvent(f"unknown op {op!r}; expected one of {', '.join(OPERATIONS)}")
    source = payload.get("source")
    if not isinstance(source, dict):
        raise InvalidChangeEvent("source is missing")
    before, after = payload.get("before"), payload.get("after")
    for name, row in (("before", before), ("after", after)):
        if row is not None and not isinstance(row, dict):
            raise InvalidChangeEvent(f"{name} must be an object or null")
    if op in ("c", "r", "u") and after is None:
        raise InvalidChangeEvent(f"op {op} without after")
    if op == "d" and before is None:
        raise InvalidChangeEvent("op d without before")
    return ChangeEvent(op, before, after, source, payload.get("ts_ms"), payload.get("transaction"))


def parse_change_key(key) -> dict | None:
    """The primary key of a change event's record key (with or without the schema wrapper)."""
    if key is None:
        return None
    parsed = _unwrap(_json(key))
    if not isinstance(parsed, dict):
        raise InvalidChangeEvent("a change event key is a JSON object")
    return parsed


def change_event_id(value, key: str | None) -> str | None:
    """A stable id of one row change (table, LSN, key): the same change published twice, by a
    restarted relay or by Debezium after a restart, gets the same id. None if not a change event."""
    try:
        payload = _unwrap(_json(value))
    except InvalidChangeEvent:
        return None
    if not isinstance(payload, dict) or payload.get("op") not in OPERATIONS:
        return None
    source = payload.get("source")
    if not isinstance(source, dict) or source.get("lsn") is None:
        return None
    return f"{source.get('db')}.{source.get('schema')}.{source.get('table')}:{source['lsn']}:{payload['op']}:{key}"


def build_envelope(*, op: str, before: dict | None, after: dict | None, source: dict, ts_ms: int) -> dict:
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts_ms, "transaction": None}


def build_source(
    *, server_name: str, db: str, schema: str, table: str, commit_ms: int, tx_id: int | None, lsn: int, snapshot: str = "false"
) -> dict:
    return {
        "version": RELAY_VERSION,
        "connector": "postgresql",
        "name": server_name,
        "ts_ms": commit_ms,
        "snapshot": snapshot,
        "db": db,
        "sequence": f'[null,"{lsn}"]',  # Debezium: [last committed LSN, this LSN], as a JSON string
        "schema": schema,
        "table": table,
        "txId": tx_id,
        "lsn": lsn,
        "xmin": None,
    }
