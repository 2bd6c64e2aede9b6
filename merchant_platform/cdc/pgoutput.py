"""A decoder of PostgreSQL's built-in logical replication output (`pgoutput`, protocol version 1),
as returned by pg_logical_slot_peek_binary_changes. pgoutput ships with PostgreSQL (no extension,
available on managed databases) and is what Debezium's connector uses by default.

Message formats: https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PG_EPOCH_MS = 946_684_800_000  # 2000-01-01T00:00:00Z, the epoch of pgoutput's timestamps

_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")


def lsn_to_int(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def lsn_to_text(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


@dataclass
class Column:
    name: str
    type_oid: int


@dataclass
class Relation:
    oid: int
    schema: str
    table: str
    columns: list[Column]


@dataclass
class Begin:
    final_lsn: int
    commit_ms: int
    xid: int


@dataclass
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_ms: int


@dataclass
class RowChange:
    """op: c (insert), u (update), d (delete). Tuples are lists of text values (None for NULL,
    UNCHANGED for an unchanged TOASTed value) in the relation's column order."""

    op: str
    relation: Relation
    old: list | None
    new: list | None


@dataclass
class Truncate:
    relations: list[Relation]


UNCHANGED = object()


class PgOutputDecoder:
    """Decodes one peek's messages; Relation messages describe the tables before their first change."""

    def __init__(self):
        self.relations: dict[int, Relation] = {}

    def decode(self, data: bytes):
        """One message -> Begin, Commit, RowChange, Truncate, or None (relation, type, origin...)."""
        kind = data[0:1]
        if kind in (b"I", b"U", b"D"):
            return self._row_change(kind, data)
        if kind == b"B":
            final_lsn, commit_us, xid = _BEGIN.unpack_from(data, 1)
            return Begin(final_lsn, PG_EPOCH_MS + commit_us // 1000, xid)
        if kind == b"C":
            _, commit_lsn, end_lsn, commit_us = _COMMIT.unpack_from(data, 1)
            return Commit(commit_lsn, end_lsn, PG_EPOCH_MS + commit_us // 1000)
        if kind == b"R":
            self._relation(data)
            return None
        if kind == b"T":
            (count,) = _U32.unpack_from(data, 1)
            oids = struct.unpack_from(f">{count}I", data, 6)
            return Truncate([self.relations[oid] for oid in oids if oid in self.relations])
        return None

    def _relation(self, data: bytes) -> None:
        (oid,) = _U32.unpack_from(data, 1)
        position = 5
        schema, position = _cstring(data, position)
        table, position = _cstring(data, position)
        position += 1  # replica identity setting
        (count,) = _U16.unpack_from(data, position)
        position += 2
        columns = []
        for _ in range(count):
            position += 1  # flags (with REPLICA IDENTITY FULL every column is flagged as key)
            name, position = _cstring(data, position)
            (type_oid,) = _U32.unpack_from(data, position)
            position += 8  # type oid, type modifier
            columns.append(Column(name, type_oid))
        self.relations[oid] = Relation(oid, schema, table, columns)

    def _row_change(self, kind: bytes, data: bytes) -> RowChange:
        (oid,) = _U32.unpack_from(data, 1)
        relation = self.relations[oid]
        position = 5
        old = new = None
        marker = data[position : position + 1]
        if marker in (b"K", b"O"):
            old, position = _tuple(data, position + 1)
            marker = data[position : position + 1]
        if marker == b"N":
            new, position = _tuple(data, position + 1)
        op = {b"I": "c", b"U": "u", b"D": "d"}[kind]
        return RowChange(op, relation, old, new)


def _cstring(data: bytes, position: int) -> tuple[str, int]:
    end = data.index(b"\x00", position)
    return data[position:end].decode(), end + 1


def _tuple(data: bytes, position: int) -> tuple[list, int]:
    (count,) = _U16.unpack_from(data, position)
    position += 2
    values: list = []
    append = values.append
    for _ in range(count):
        kind = data[position]
        position += 1
        if kind == 0x74:  # 't': text
            (length,) = _I32.unpack_from(data, position)
            position += 4
            append(data[position : position + length].decode())
            position += length
        elif kind == 0x6E:  # 'n': NULL
            append(None)
        else:  # 'u': unchanged TOASTed value (not sent)
            append(UNCHANGED)
    return values, position
