"""The transactional outbox: how an event tied to a database change is published.

`publish()` inserts the event into the service's outbox table through the same alias (connection
and transaction) as the change, so the event exists if and only if the change committed. After the
commit a background thread of the same process relays it at once (low latency; unless
OUTBOX_RELAY_AFTER_COMMIT is off); if the broker is down then, the row stays pending and the relay
loop of `manage.py consume` (or the next commit) sends it when the broker is back. Nothing is lost
while the database holds the row.

Rows are relayed in outbox-id order under a PostgreSQL advisory lock (one relay at a time per
table, whichever process it runs in) and marked sent only after the broker acknowledged them. When
a record of a batch fails, only the rows before it are marked sent; the rest are sent again later,
so per-key order holds and the worst case is a duplicate, which consumers drop by `messageId`.

A row no retry can send (over the producer's record limit, an invalid topic, a value or header the
producer refuses) is parked instead (`parked_at`, `parked_reason`, an `outbox.parked` error line)
and the relay goes on with the rows behind it: one bad event must not stop a service's outbox for
every merchant. `publish` refuses an event over the limit at once (EventTooLarge, a 400).

With MESSAGING_VALIDATE_CONTRACTS (the test settings) every payload is checked against its topic's
contract (`contracts.py`) before it is stored, and a violation raises ContractViolation.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connections, router, transaction
from django.utils import timezone
from kafka.errors import InvalidRecordError, InvalidTopicError, KafkaError, MessageSizeTooLargeError, RecordListTooLargeError

from merchant_platform.context import current_request_id
from merchant_platform.db import copy_insert
from merchant_platform.logging import get_logger
from merchant_platform.messaging import contracts
from merchant_platform.messaging.messages import encode_key, encode_value, event_headers, wire_headers
from merchant_platform.messaging.models import OutboxMessageBase
from merchant_platform.messaging.producer import PublishError, check_record_size, get_producer
from merchant_platform.messaging.stores import outbox_model_for
from merchant_platform.registry import all_services

log = get_logger(__name__)
RELAY_BATCH_SIZE = 500
RELAY_ACK_TIMEOUT_SECONDS = 15.0
# What no retry fixes: the record itself is refused (the producer raises ValueError for an invalid
# topic name, UnicodeEncodeError for text it cannot encode, TypeError for a header it cannot send).
UNSENDABLE = (MessageSizeTooLargeError, RecordListTooLargeError, InvalidTopicError, InvalidRecordError, ValueError, TypeError)


def source_for_alias(alias: str) -> str:
    for service in all_services():
        if service.db_alias == alias:
            return service.name
    return "platform"


def publish(
    topic: str,
    payload,
    *,
    event_type: str,
    using: str,
    key: str | int | None = None,
    headers: dict[str, str] | None = None,
) -> OutboxMessageBase:
    """Publish `payload` on `topic` once the current transaction on `using` commits.

    Call it inside the service's `transaction.atomic(using=<alias>)`, next to the write the event
    announces. Outside a transaction the row commits at once and is relayed at once.
    """
    model = outbox_model_for(using)
    source = source_for_alias(using)
    row = model.objects.using(using).create(**_outbox_fields(topic, key, payload, event_type=event_type, source=source, headers=headers))
    _relay_after_commit(using)
    return row


def publish_many(
    topic: str,
    events: list[tuple[str | int | None, object]],
    *,
    event_type: str,
    using: str,
    headers: dict[str, str] | None = None,
) -> list[OutboxMessageBase]:
    """`publish` for several (key, payload) events of one type, in one COPY: what a batch consumer
    announcing one event per handled message uses. They are relayed in the given order."""
    return publish_all([Outgoing(topic, payload, event_type, key, headers) for key, payload in events], using=using)


@dataclass(frozen=True)
class Outgoing:
    """One event for `publish_all`: what `publish` takes, as a record."""

    topic: str
    payload: object
    event_type: str
    key: str | int | None = None
    headers: dict[str, str] | None = None


def publish_all(messages: list[Outgoing], *, using: str) -> list[OutboxMessageBase]:
    """`publish` for several events of any topics and types, in one COPY: what one state change
    announcing several events uses (one round trip instead of one per event). They are relayed in
    the given order (the rows take their ids from the table's sequence in that order; the returned
    rows' `id` stays None)."""
    if not messages:
        return []
    model, source = outbox_model_for(using), source_for_alias(using)
    rows = copy_insert(
        [model(**_outbox_fields(m.topic, m.key, m.payload, event_type=m.event_type, source=source, headers=m.headers)) for m in messages],
        using=using,
    )
    _relay_after_commit(using)
    return rows


def _relay_after_commit(using: str) -> None:
    # Off (OUTBOX_RELAY_AFTER_COMMIT=false) where `manage.py consume` relays instead: a web process
    # then spends nothing on the broker, and the events leave within OUTBOX_RELAY_INTERVAL_SECONDS.
    if settings.OUTBOX_RELAY_AFTER_COMMIT:
        transaction.on_commit(lambda: wake_relay(using), using=using)


def _outbox_fields(topic: str, key, payload, *, event_type: str, source: str, headers: dict[str, str] | None) -> dict:
    message_id = uuid.uuid4().hex
    all_headers = event_headers(event_type=event_type, source=source, request_id=current_request_id(), message_id=message_id, extra=headers)
    value = encode_value(payload)
    if getattr(settings, "MESSAGING_VALIDATE_CONTRACTS", False):
        contracts.check(topic, value)
    check_record_size(topic, encode_key(key), value, wire_headers(all_headers))
    return {
        "message_id": uuid.UUID(message_id),
        "topic": topic,
        "key": None if key is None else str(key),
        "value": value.decode(),
        "headers": all_headers,
    }


class OutboxRelay:
    """Sends one outbox table's committed rows to Kafka, in order, and marks them sent."""

    def __init__(self, model: type[OutboxMessageBase], *, batch_size: int = RELAY_BATCH_SIZE):
        self.model = model
        self.alias = router.db_for_write(model)
        self.batch_size = batch_size
        self.lock_name = f"merchant_platform.outbox:{model._meta.db_table}"

    def relay_pending(self) -> int:
        """Send every pending row; returns how many were sent. Raises PublishError when the broker
        did not acknowledge (rows before the failure are marked sent, the rest stay pending). Rows
        that can never be sent are parked on the way."""
        total = 0
        while True:
            sent, more = self._relay_batch()
            total += sent
            if not more:
                return total

    def _relay_batch(self) -> tuple[int, bool]:
        manager = self.model.objects.using(self.alias)
        try:
            producer = get_producer()  # before taking the lock: connecting may take seconds
        except KafkaError as exc:
            raise PublishError(f"outbox {self.model._meta.db_table}: broker unavailable: {exc}") from exc
        with transaction.atomic(using=self.alias):
            with connections[self.alias].cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [self.lock_name])
            rows = list(
                manager.filter(sent_at__isnull=True, parked_at__isnull=True)
                .order_by("id")
                .values_list("id", "topic", "key", "value", "headers")[: self.batch_size]
            )
            if not rows:
                return 0, False
            outcomes, failure = [], None  # (row, future or the error that refused it)
            for row in rows:
                _, topic, key, value, headers = row
                try:
                    outcomes.append((row, producer.send(topic, value=value.encode(), key=encode_key(key), headers=wire_headers(headers))))
                except UNSENDABLE as exc:
                    outcomes.append((row, exc))
                except KafkaError as exc:  # transient (metadata timeout...): this row and those behind it wait
                    failure = exc
                    break
            try:
                producer.flush(timeout=RELAY_ACK_TIMEOUT_SECONDS)
            except KafkaError as exc:
                log.warning("outbox.flush_failed", table=self.model._meta.db_table, error=str(exc))
            acknowledged = []
            for row, outcome in outcomes:
                error = outcome if isinstance(outcome, Exception) else outcome.exception if outcome.is_done else None
                if isinstance(error, UNSENDABLE):
                    self._park(row, error)
                elif not outcome.is_done or outcome.failed():
                    failure = error or "no acknowledgement in time"
                    break
                else:
                    acknowledged.append(row[0])
            if acknowledged:
                manager.filter(id__in=acknowledged).update(sent_at=timezone.now())
        if failure is not None:
            raise PublishError(
                f"outbox {self.model._meta.db_table}: {len(acknowledged)} of {len(rows)} rows sent; the broker failed: {failure}"
            )
        return len(acknowledged), len(rows) == self.batch_size

    def _park(self, row: tuple, error: Exception) -> None:
        row_id, topic, _, value, headers = row
        reason = f"{type(error).__name__}: {error}"[:2000]
        self.model.objects.using(self.alias).filter(id=row_id).update(parked_at=timezone.now(), parked_reason=reason)
        log.error(
            "outbox.parked",
            table=self.model._meta.db_table,
            id=row_id,
            topic=topic,
            messageId=headers.get("messageId"),
            valueBytes=len(value),
            reason=reason,
        )

    def prune(self) -> int:
        """Delete rows sent more than OUTBOX_RETENTION_HOURS ago."""
        cutoff = timezone.now() - timedelta(hours=settings.OUTBOX_RETENTION_HOURS)
        deleted, _ = self.model.objects.using(self.alias).filter(sent_at__lt=cutoff).delete()
        return deleted

    def pending_count(self) -> int:
        return self.model.objects.using(self.alias).filter(sent_at__isnull=True, parked_at__isnull=True).count()


class _AfterCommitRelay:
    """A daemon thread per process that relays an alias's outbox right after a commit wrote to it,
    so the request that committed does not wait for the broker.

    In a Celery prefork process the relay runs in the committing thread instead (`relay_inline`):
    Celery's Django fixup closes every database pool before and after each task there, and a relay
    thread still at work took the closed pool ("pool has already been opened/closed and cannot be
    reused"), leaving its events to the durable relay loop, seconds later or, with none running,
    never. A task is background work: it can wait for the broker's acknowledgement."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self.inline = False

    def wake(self, alias: str) -> None:
        if self.inline:
            self._relay(alias)
            return
        with self._lock:
            self._pending.add(alias)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="outbox-after-commit", daemon=True)
                self._thread.start()
        self._wakeup.set()

    def _run(self) -> None:
        while True:
            self._wakeup.wait()
            self._wakeup.clear()
            with self._lock:
                aliases, self._pending = self._pending, set()
            for alias in aliases:
                self._relay(alias)
            for alias in aliases:
                connections[alias].close()

    @staticmethod
    def _relay(alias: str) -> None:
        try:
            OutboxRelay(outbox_model_for(alias)).relay_pending()
        except Exception as exc:  # the relay loop retries; a commit never fails because of it
            log.warning("outbox.relay_deferred", alias=alias, error=str(exc))


_after_commit = _AfterCommitRelay()


def wake_relay(alias: str) -> None:
    _after_commit.wake(alias)


def relay_inline() -> None:
    """Relay after a commit in the committing thread, from now on in this process (Celery pool
    processes: see _AfterCommitRelay)."""
    _after_commit.inline = True


def relay_loop(models: list[type[OutboxMessageBase]], stop: threading.Event, *, interval: float | None = None) -> None:
    """The durable relay: every `interval` seconds send what is pending in each table (what the
    after-commit thread could not send), and prune old sent rows now and then."""
    interval = settings.OUTBOX_RELAY_INTERVAL_SECONDS if interval is None else interval
    relays = [OutboxRelay(model) for model in models]
    log.info("outbox.relay_started", tables=",".join(r.model._meta.db_table for r in relays))
    last_prune = 0.0
    failures = 0
    while not stop.is_set():
        try:
            for relay in relays:
                sent = relay.relay_pending()
                if sent:
                    log.info("outbox.relayed", table=relay.model._meta.db_table, count=sent)
            if time.monotonic() - last_prune > 3600:
                for relay in relays:
                    relay.prune()
                last_prune = time.monotonic()
            failures = 0
        except Exception as exc:  # broker or database down: keep the rows, back off, try again
            failures += 1
            log.warning("outbox.relay_failed", error=str(exc), failures=failures)
        stop.wait(min(interval * (2 ** min(failures, 5)), 30.0))
    for relay in relays:
        connections[relay.alias].close()
