"""The CDC relay behind `manage.py cdc` (docs/architecture.md section 6).

It reads a logical replication slot with PostgreSQL's built-in `pgoutput` plugin through the SQL
interface (pg_logical_slot_peek_binary_changes), publishes one Debezium change event per row change
keyed by primary key, and advances the slot only after the broker acknowledged every event up to
the advanced position. Killed at any moment, it reads the unacknowledged changes again when it
restarts: delivery is at least once, and consumers drop repeats by the event's (table, LSN, key).

Setup (idempotent, at every start): captured tables get REPLICA IDENTITY FULL (so updates and
deletes carry the whole old row), a publication named after the slot lists them, the slot is
created if missing. With snapshot mode `initial` a new slot is followed by a snapshot of every
captured table as op=r events; a snapshot in progress is marked by a second, physical slot
`<slot>_snapshot` that reserves no WAL, so a relay killed mid-snapshot redoes it on restart.

With MESSAGING_VALIDATE_CONTRACTS every change event is checked against its topic's contract
(messaging/contracts.py) before it is sent; one that breaks it stops the relay with
ContractViolation (logged `cdc.contract_violation`), the slot left before it.

Lag (bytes of WAL the slot holds back) is logged every LAG_LOG_SECONDS, exported as a Prometheus
gauge, and readable without the relay through `slot_lag()` (`manage.py cdc --status`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.db import connections
from kafka.errors import KafkaError
from prometheus_client import Counter, Gauge
from psycopg import sql

from merchant_platform.cdc.captures import Capture
from merchant_platform.cdc.envelope import build_envelope, build_source
from merchant_platform.cdc.pgoutput import UNCHANGED, Begin, Commit, PgOutputDecoder, RowChange, Truncate, lsn_to_int, lsn_to_text
from merchant_platform.cdc.values import UNAVAILABLE, convert
from merchant_platform.logging import get_logger
from merchant_platform.messaging import contracts
from merchant_platform.messaging.messages import MESSAGE_ID
from merchant_platform.messaging.producer import PublishError, get_producer

log = get_logger(__name__)

SNAPSHOT_MODES = ("initial", "always", "never")
SLOT_NAME = re.compile(r"^[a-z0-9_]{1,50}$")
LAG_LOG_SECONDS = 30.0
ACK_TIMEOUT_SECONDS = 30.0
SNAPSHOT_FLUSH_EVERY = 10_000
MAX_BACKOFF_SECONDS = 30.0

LAG_BYTES = Gauge("merchant_platform_cdc_slot_lag_bytes", "WAL bytes the CDC slot holds back (current LSN - confirmed flush LSN)", ["slot"])
CHANGES_PUBLISHED = Counter("merchant_platform_cdc_changes_published", "Change events the CDC relay published", ["slot"])


class CdcConfigurationError(RuntimeError):
    """The relay cannot capture what it was asked to (missing table, slot of another database...)."""


@dataclass
class RowEvent:
    """One row change (or snapshot row) ready to publish."""

    table: CapturedTable
    op: str
    before: dict | None
    after: dict | None
    commit_ms: int
    tx_id: int | None
    lsn: int


@dataclass
class CapturedTable:
    schema: str
    table: str
    topic: str
    key_columns: list[str]
    columns: list[tuple[str, int]]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"


def connection_params(alias: str) -> dict:
    """psycopg connection parameters of a Django alias (same server, database and search_path)."""
    params = dict(connections[alias].get_connection_params())
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    return params


def connect(alias: str) -> psycopg.Connection:
    connection = psycopg.connect(**connection_params(alias), autocommit=True)
    # Text output the value converters expect: timestamps in UTC and ISO, bytea in hex.
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute("SET DateStyle = 'ISO, YMD'")
    connection.execute("SET bytea_output = 'hex'")
    connection.execute("SET extra_float_digits = 1")
    return connection


def slot_lag(connection: psycopg.Connection, slot: str) -> dict | None:
    """The slot's position and how much WAL it holds back; None if there is no such slot."""
    row = connection.execute(
        "SELECT confirmed_flush_lsn::text, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, active, wal_status"
        " FROM pg_replication_slots WHERE slot_name = %s",
        [slot],
    ).fetchone()
    if row is None:
        return None
    return {"slot": slot, "confirmedFlushLsn": row[0], "lagBytes": int(row[1] or 0), "active": row[2], "walStatus": row[3]}


def drop_slot(connection: psycopg.Connection, slot: str) -> None:
    """Drop the slot, its snapshot marker and its publication (operator action, tests)."""
    for name in (slot, f"{slot}_snapshot"):
        if connection.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", [name]).fetchone():
            connection.execute("SELECT pg_drop_replication_slot(%s)", [name])
    connection.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(slot)))


class CdcRelay:
    def __init__(
        self,
        *,
        alias: str,
        slot: str,
        captures: list[Capture],
        snapshot_mode: str = "initial",
        batch_size: int = 20_000,
        server_name: str = "merchant-platform",
        tombstones: bool = True,
        poll_interval: float = 0.5,
    ):
        if not SLOT_NAME.match(slot):
            raise CdcConfigurationError(f"slot name {slot!r} must match {SLOT_NAME.pattern}")
        if snapshot_mode not in SNAPSHOT_MODES:
            raise CdcConfigurationError(f"snapshot mode must be one of {', '.join(SNAPSHOT_MODES)}")
        if not captures:
            raise CdcConfigurationError("no table to capture")
        self.alias = alias
        self.slot = slot
        self.marker_slot = f"{slot}_snapshot"
        self.captures = captures
        self.snapshot_mode = snapshot_mode
        self.batch_size = batch_size
        self.server_name = server_name
        self.tombstones = tombstones
        self.poll_interval = poll_interval
        self.connection: psycopg.Connection | None = None
        self.tables: dict[tuple[str, str], CapturedTable] = {}
        self.database = ""
        self.confirmed_lsn = 0
        self.published = 0
        self.caught_up = False

    # ------------------------------------------------------------------ setup
    def open(self) -> None:
        if self.connection is None or self.connection.closed:
            self.connection = connect(self.alias)
            self.database = self.connection.info.dbname

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def setup(self) -> None:
        """Make the tables, publication and slot ready, and snapshot when the mode asks for it."""
        self.open()
        self.tables = {}
        for capture in self.captures:
            table = self._resolve(capture)
            self.tables[(table.schema, table.table)] = table
        self._ensure_publication()
        created = self._ensure_slot()
        marker = self._slot_exists(self.marker_slot)
        if self.snapshot_mode == "always" or (self.snapshot_mode == "initial" and (created or marker)):
            self.snapshot()
        log.info("cdc.ready", tables=",".join(t.qualified for t in self.tables.values()), **self.lag())

    def _resolve(self, capture: Capture) -> CapturedTable:
        name = capture.table_name()
        row = self.connection.execute(
            "SELECT c.oid, n.nspname, c.relname, c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.oid = to_regclass(%s)",
            [name],
        ).fetchone()
        if row is None:
            raise CdcConfigurationError(f"table {name} does not exist in database {self.database} (alias {self.alias})")
        oid, schema, table, identity = row
        keys = [
            key
            for (key,) in self.connection.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
                " WHERE i.indrelid = %s AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)",
                [oid],
            )
        ]
        if not keys:
            raise CdcConfigurationError(f"table {schema}.{table} has no primary key to key its change events by")
        columns = self.connection.execute(
            "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [oid]
        ).fetchall()
        if identity != "f":
            self.connection.execute(
                sql.SQL("ALTER TABLE {}.{} REPLICA IDENTITY FULL").format(sql.Identifier(schema), sql.Identifier(table))
            )
            log.info("cdc.replica_identity_full", table=f"{schema}.{table}")
        return CapturedTable(schema, table, capture.topic, keys, [(n, int(t)) for n, t in columns])

    def _ensure_publication(self) -> None:
        """The publication must exist before the slot: pgoutput looks it up as of each change."""
        tables = sql.SQL(", ").join(
            sql.SQL("{}.{}").format(sql.Identifier(t.schema), sql.Identifier(t.table)) for t in self.tables.values()
        )
        exists = self.connection.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", [self.slot]).fetchone()
        verb = "ALTER PUBLICATION {} SET TABLE " if exists else "CREATE PUBLICATION {} FOR TABLE "
        self.connection.execute(sql.SQL(verb).format(sql.Identifier(self.slot)) + tables)

    def _slot_exists(self, name: str) -> bool:
        return self.connection.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", [name]).fetchone() is not None

    def _ensure_slot(self) -> bool:
        row = self.connection.execute(
            "SELECT database, plugin, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", [self.slot]
        ).fetchone()
        if row is not None:
            database, plugin, confirmed = row
            if database != self.database or plugin != "pgoutput":
                raise CdcConfigurationError(
                    f"slot {self.slot} belongs to database {database} with plugin {plugin}; choose another CDC_SLOT_NAME"
                )
            self.confirmed_lsn = lsn_to_int(confirmed)
            return False
        if self.snapshot_mode != "never" and not self._slot_exists(self.marker_slot):
            self.connection.execute("SELECT pg_create_physical_replication_slot(%s)", [self.marker_slot])
        (lsn,) = self.connection.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", [self.slot]).fetchone()
        self.confirmed_lsn = lsn_to_int(lsn)
        log.info("cdc.slot_created", slot=self.slot, lsn=lsn)
        return True

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> int:
        """Publish every captured row as an op=r event (rows committed after the slot's start may
        also arrive as changes afterwards: consumers apply both, in order)."""
        if not self._slot_exists(self.marker_slot):
            self.connection.execute("SELECT pg_create_physical_replication_slot(%s)", [self.marker_slot])
        futures = []
        count = 0
        pending = None
        now_ms = int(time.time() * 1000)
        with self.connection.transaction():
            self.connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            for table in self.tables.values():
                select = sql.SQL("SELECT {} FROM {}.{}").format(
                    sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(name)) for name, _ in table.columns),
                    sql.Identifier(table.schema),
                    sql.Identifier(table.table),
                )
                with self.connection.cursor(name=f"cdc_snapshot_{self.slot}") as cursor:
                    cursor.itersize = 2000
                    cursor.execute(select)
                    for values in cursor:
                        if pending is not None:
                            futures += self._send(pending, snapshot="true")
                        after = {name: convert(type_oid, value) for (name, type_oid), value in zip(table.columns, values, strict=True)}
                        pending = RowEvent(table, "r", None, after, now_ms, None, self.confirmed_lsn)
                        count += 1
                        if len(futures) >= SNAPSHOT_FLUSH_EVERY:
                            self._await(futures)
                            futures = []
        if pending is not None:
            futures += self._send(pending, snapshot="last")
        self._await(futures)
        self.connection.execute("SELECT pg_drop_replication_slot(%s)", [self.marker_slot])
        self.published += count
        CHANGES_PUBLISHED.labels(self.slot).inc(count)
        log.info("cdc.snapshot_done", slot=self.slot, rows=count)
        return count

    # ------------------------------------------------------------------ streaming
    def read_batch(self) -> tuple[list[RowEvent], int | None]:
        """Up to batch_size messages of whole transactions committed before the current flush
        position. Returns (row changes, the LSN the slot may advance to once they are published)."""
        (flush_text,) = self.connection.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        rows = self.connection.execute(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes("
            "%s, %s::pg_lsn, %s, 'proto_version', '1', 'publication_names', %s)",
            [self.slot, flush_text, self.batch_size, self.slot],
        ).fetchall()
        decoder = PgOutputDecoder()
        changes: list[RowEvent] = []
        transaction: Begin | None = None
        last_end = None
        for lsn_text, data in rows:
            message = decoder.decode(data)
            if isinstance(message, RowChange):
                table = self.tables.get((message.relation.schema, message.relation.table))
                if table is not None:
                    changes.append(self._row_event(table, message, transaction, lsn_to_int(lsn_text)))
            elif isinstance(message, Begin):
                transaction = message
            elif isinstance(message, Commit):
                last_end = message.end_lsn
            elif isinstance(message, Truncate):
                log.warning(
                    "cdc.truncate_not_published", slot=self.slot, tables=",".join(f"{r.schema}.{r.table}" for r in message.relations)
                )
        # Fewer rows than asked: decoding reached the flush position, so everything before it is read
        # (transactions that touched no captured table included) and the slot may move that far.
        self.caught_up = len(rows) < self.batch_size
        advance_to = lsn_to_int(flush_text) if self.caught_up else last_end
        return changes, advance_to

    def _row_event(self, table: CapturedTable, change: RowChange, transaction: Begin | None, lsn: int) -> RowEvent:
        names = [column.name for column in change.relation.columns]
        types = [column.type_oid for column in change.relation.columns]
        before = None
        if change.old is not None:
            before = {
                name: (UNAVAILABLE if value is UNCHANGED else convert(type_oid, value))
                for name, type_oid, value in zip(names, types, change.old, strict=True)
            }
        after = None
        if change.new is not None:
            after = {}
            for name, type_oid, value in zip(names, types, change.new, strict=True):
                if value is UNCHANGED:  # an unchanged TOASTed value: the old row (REPLICA IDENTITY FULL) has it
                    after[name] = before[name] if before is not None else UNAVAILABLE
                else:
                    after[name] = convert(type_oid, value)
        commit_ms = transaction.commit_ms if transaction else int(time.time() * 1000)
        tx_id = transaction.xid if transaction else None
        return RowEvent(table, change.op, before, after, commit_ms, tx_id, lsn)

    def _send(self, event: RowEvent, *, snapshot: str = "false") -> list:
        table = event.table
        row = event.before if event.op == "d" else event.after
        key = json.dumps({column: row[column] for column in table.key_columns}, separators=(",", ":"))
        source = build_source(
            server_name=self.server_name,
            db=self.database,
            schema=table.schema,
            table=table.table,
            commit_ms=event.commit_ms,
            tx_id=event.tx_id,
            lsn=event.lsn,
            snapshot=snapshot,
        )
        value = build_envelope(op=event.op, before=event.before, after=event.after, source=source, ts_ms=int(time.time() * 1000))
        message_id = f"{self.database}.{table.schema}.{table.table}:{event.lsn}:{event.op}:{key}"
        producer = get_producer()
        encoded_key = key.encode()
        encoded_value = json.dumps(value, separators=(",", ":")).encode()
        if getattr(settings, "MESSAGING_VALIDATE_CONTRACTS", False):
            self._check_contract(table, encoded_value, message_id)
        futures = [producer.send(table.topic, key=encoded_key, value=encoded_value, headers=[(MESSAGE_ID, message_id.encode())])]
        if event.op == "d" and self.tombstones:
            futures.append(producer.send(table.topic, key=encoded_key, value=None))
        return futures

    def _check_contract(self, table: CapturedTable, value: bytes, message_id: str) -> None:
        """Raise ContractViolation for a change event that breaks its topic's contract, before it is
        sent: the slot stays where it is, so the relay stops on that change (`run`) until the
        contract or the table is fixed, as the outbox refuses such an event in its transaction."""
        try:
            contracts.check(table.topic, value)
        except contracts.ContractViolation as exc:
            log.error(
                "cdc.contract_violation", slot=self.slot, table=table.qualified, topic=table.topic, messageId=message_id, error=str(exc)
            )
            raise

    def _await(self, futures: list) -> None:
        if not futures:
            return
        try:
            get_producer().flush(timeout=ACK_TIMEOUT_SECONDS)
        except KafkaError as exc:
            raise PublishError(f"CDC relay {self.slot}: broker did not acknowledge: {exc}") from exc
        for future in futures:
            if not future.is_done or future.failed():
                raise PublishError(
                    f"CDC relay {self.slot}: broker did not acknowledge: {future.exception if future.is_done else 'timeout'}"
                )

    def acknowledge(self, lsn: int | None) -> None:
        """Move the slot to `lsn` (only ever forward): PostgreSQL may then recycle the WAL before it."""
        if lsn is None or lsn <= self.confirmed_lsn:
            return
        self.connection.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", [self.slot, lsn_to_text(lsn)])
        self.confirmed_lsn = lsn

    def poll_once(self) -> int:
        """Read, publish and acknowledge one batch; returns the number of row changes published."""
        changes, advance_to = self.read_batch()
        futures = []
        for change in changes:
            futures += self._send(change)
        self._await(futures)
        self.acknowledge(advance_to)
        if changes:
            self.published += len(changes)
            CHANGES_PUBLISHED.labels(self.slot).inc(len(changes))
        return len(changes)

    def lag(self) -> dict:
        state = slot_lag(self.connection, self.slot) or {}
        if state:
            LAG_BYTES.labels(self.slot).set(state["lagBytes"])
        return state

    def run(self, stop: threading.Event) -> None:
        """Relay until `stop`; database or broker failures are retried with backoff. A change that
        breaks its contract (with MESSAGING_VALIDATE_CONTRACTS) raises ContractViolation."""
        failures = 0
        ready = False
        last_lag_log = 0.0
        while not stop.is_set():
            try:
                if not ready:
                    self.setup()
                    ready = True
                self.poll_once()
                failures = 0
                if time.monotonic() - last_lag_log > LAG_LOG_SECONDS:
                    log.info("cdc.lag", published=self.published, **self.lag())
                    last_lag_log = time.monotonic()
                if self.caught_up:  # nothing more was committed before this batch: wait for more
                    stop.wait(self.poll_interval)
            except contracts.ContractViolation:
                self.close()  # no retry sends it: the change stays in the slot for a fixed relay
                raise
            except (psycopg.Error, KafkaError, PublishError) as exc:
                failures += 1
                log.warning("cdc.relay_failed", slot=self.slot, error=f"{type(exc).__name__}: {exc}", failures=failures)
                if self.connection is not None and (self.connection.closed or self.connection.broken):
                    self.close()
                    ready = False
                stop.wait(min(2**failures * 0.5, MAX_BACKOFF_SECONDS))
        self.close()
