"""The consumer runner behind `manage.py consume`.

Each consumer group gets one Kafka consumer on a thread of its own, subscribed to the topics of
every registered consumer in the group (a service's consumers share the spec's group, e.g.
SVC-00050-INVENTORY_CONSUMER_GROUP), and each poll's records go to the consumer owning their topic.
One member per group and process, not one per consumer: members of one group that subscribe to
different topics rebalance each other, and with Tansu only the group leader's topics were ever
assigned (the others' consumers stayed idle).

- At-least-once: offsets are committed only after the handler's transaction committed.
- Group commit: the messages of one poll are handled in ONE database transaction on the consumer's
  alias (with the idempotency records, spec 6.2), then their offsets are committed. A PostgreSQL
  commit costs a WAL flush, so one per message would cap a consumer near the disk's flush rate.
  A batch consumer (batch=True) gets the poll's new messages as one list, so it can write them
  with one statement (bulk_create) instead of one round trip each.
- A handler that raises rolls that transaction back; the messages before it are handled again in a
  transaction of their own, and the failing one alone, retried with exponential backoff a bounded
  number of times, then parked on `<topic>.DLQ` with the error in its headers; the partition moves
  on. A value that is not JSON is parked at once (no retry can fix it).
- The consumer stays in its group whatever its handlers do: max_poll_interval_ms is counted between
  poll() calls (kafka-python heartbeats on a thread of its own, but that does not cover a slow poll
  loop), so nothing sleeps inside a poll. A message waiting for a retry holds its partition: the
  partition is rewound to it and what poll() returns of it is set aside until the retry is due,
  while poll() goes on (other partitions flow, heartbeats and commits work). (Not pause(): in
  kafka-python 3.0 a partition paused while the fetcher holds parsed records of it is never fetched
  again after resume().) A poll whose messages take more than half of max_poll_interval_ms stops
  there and leaves the rest to the next poll.
- A parked message is recorded (in the consumer's ProcessedMessage table, with the dead letter's
  acknowledgement, else in the runner), so a redelivery after a rebalance does not park it again.
- A message the runner cannot even identify or decode is parked at once with the reason.
- A database that is down is not the message's fault: the batch is rewound and retried, nothing is
  parked, and no retry budget is spent. "Down" is told by the error's SQLSTATE (`database_down`):
  a deadlock, serialization failure, lock or statement timeout or a row too large is the
  handler's failure (retried, then parked), never taken for an outage.
- Stop (SIGTERM/SIGINT): the message in hand is finished, the transaction and offsets committed,
  the consumer leaves its group, the thread ends.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable

import psycopg
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import InterfaceError, OperationalError, connections, transaction
from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.errors import CommitFailedError, KafkaError, MessageSizeTooLargeError

from merchant_platform.context import accept_request_id, bind_request_id, reset_request_id, sane_request_id
from merchant_platform.logging import get_logger
from merchant_platform.messaging.config import consumer_options
from merchant_platform.messaging.idempotency import claim_messages
from merchant_platform.messaging.messages import Message, UndecodableMessage, wire_headers
from merchant_platform.messaging.producer import get_producer
from merchant_platform.messaging.registry import ConsumerSpec
from merchant_platform.messaging.stores import processed_model_for
from merchant_platform.messaging.topics import dead_letter_topic

log = get_logger(__name__)
POLL_TIMEOUT_MS = 500
# kafka-python parses fetched records on its own I/O thread. With CPython's default 5 ms GIL switch
# interval, a handler waiting for a database reply then waits for the GIL after every round trip
# (measured here: 1,212 idempotent writes/s at 5 ms, 2,312 at 0.5 ms). Consumer processes are I/O
# bound, so they hand the GIL over sooner.
SWITCH_INTERVAL_SECONDS = 0.0005
MAX_BACKOFF_SECONDS = 30.0
DEAD_LETTER_ACK_SECONDS = 15.0
DEAD_LETTER_HEADERS = (
    "dlq.error",
    "dlq.errorClass",
    "dlq.topic",
    "dlq.partition",
    "dlq.offset",
    "dlq.consumer",
    "dlq.group",
    "dlq.attempts",
    "dlq.failedAt",
)
# SQLSTATEs of a database that serves nobody (connection exceptions, insufficient resources, system
# errors, shutdowns): no fault of the message. Every other error class (40 deadlock and
# serialization failure, 55P03 lock timeout, 57014 statement timeout, 54 a row too large...) is the
# handler's failure.
DATABASE_DOWN_SQLSTATE_CLASSES = ("08", "53", "58")
DATABASE_DOWN_SQLSTATES = ("57P01", "57P02", "57P03", "57P04", "57P05")


def database_down(exc: BaseException) -> bool:
    """Whether `exc` (or what it wraps) says the database cannot be reached or serve, rather than
    that this handler's statement failed."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (InterfaceError, psycopg.InterfaceError)):
            return True
        if isinstance(error, psycopg.OperationalError):
            state = error.sqlstate
            return state is None or state[:2] in DATABASE_DOWN_SQLSTATE_CLASSES or state in DATABASE_DOWN_SQLSTATES
        error = error.__cause__ or error.__context__
    # Django's own OperationalError without a driver error behind it: take it for an outage.
    return isinstance(exc, OperationalError)


class _Stopped(Exception):
    """Stop was requested while a dead letter was waiting for the broker: leave it uncommitted."""


class _DatabaseUnavailable(Exception):
    """The consumer's database connection broke: rewind and retry later, park nothing."""


class ConsumerRunner:
    def __init__(self, spec: ConsumerSpec, stop: threading.Event, *, consumer_factory: Callable[..., KafkaConsumer] = KafkaConsumer):
        self.spec = spec
        self.stop = stop
        self.consumer_factory = consumer_factory
        self.consumer: KafkaConsumer | None = None
        self.processed_model = spec.processed_model or (processed_model_for(spec.alias) if spec.idempotent else None)
        self.park_model = self.processed_model or _processed_model_or_none(spec.alias)
        self.handled = 0
        self.dead_lettered = 0
        self.assignments = 0  # how many times the group assigned this member partitions (1: never rebalanced)
        self.attempts: dict[str, int] = {}  # failed attempts of messages waiting for a retry, by position
        # Partitions held by a message waiting for a retry: (when the retry is due, the message's offset).
        self.retry_at: dict[TopicPartition, tuple[float, int]] = {}
        self.parked: set[str] = set()  # what this runner parked, where there is no ProcessedMessage table

    # ------------------------------------------------------------------ lifecycle
    def run(self) -> None:
        """Consume until stop is set; reconnect with backoff when the broker is unreachable."""
        failures = 0
        while not self.stop.is_set():
            try:
                self._session()
                failures = 0
            except KafkaError as exc:
                failures += 1
                log.warning("consumer.broker_unavailable", consumer=self.spec.name, error=str(exc), failures=failures)
                self.stop.wait(min(2**failures, MAX_BACKOFF_SECONDS))
            except Exception:  # start over from the committed offsets: nothing uncommitted is lost
                failures += 1
                log.exception("consumer.crashed", consumer=self.spec.name, failures=failures)
                connections[self.spec.alias].close()
                self.stop.wait(min(2**failures, MAX_BACKOFF_SECONDS))
        connections[self.spec.alias].close()

    def _session(self) -> None:
        spec = self.spec
        self.consumer = self.consumer_factory(**consumer_options(group_id=spec.group_id, offset_reset=spec.offset_reset))
        self._poll_loop(list(spec.topics), self.process_batch)

    def _poll_loop(self, topics: list[str], process: Callable[[dict], None]) -> None:
        spec = self.spec
        try:
            self.consumer.subscribe(topics, listener=_Rebalances(self))
            log.info("consumer.started", consumer=spec.name, group=spec.group_id, topics=",".join(topics), offsetReset=spec.offset_reset)
            while not self.stop.is_set():
                self._release_due()
                batch = self.consumer.poll(timeout_ms=self._poll_timeout_ms())
                if not batch:
                    continue
                process(batch)
                if all(partition in self.retry_at for partition in batch):
                    self.stop.wait(self._poll_timeout_ms() / 1000)  # only held records came: do not spin
        finally:
            self.consumer.close(autocommit=False)
            self.consumer = None
            log.info("consumer.stopped", consumer=spec.name, handled=self.handled, deadLettered=self.dead_lettered)

    # ------------------------------------------------------------------ one poll
    def process_batch(self, batch: dict) -> None:
        for partition in batch.keys() & self.retry_at.keys():
            self.consumer.seek(partition, self.retry_at[partition][1])  # held until its retry is due
        messages = [
            Message.from_record(record) for partition, records in batch.items() if partition not in self.retry_at for record in records
        ]
        started = time.monotonic()
        budget = settings.KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS / 2000
        done = 0
        limit: int | None = None
        alone_until = 0  # messages before this index are handled one at a time (a batch failed)
        try:
            while done < len(messages) and not self.stop.is_set():
                if done and time.monotonic() - started > budget:
                    log.info("consumer.poll_budget_spent", consumer=self.spec.name, handled=done, left=len(messages) - done)
                    self._rewind(messages[done:])
                    break
                size = 1 if done < alone_until else limit
                chunk = messages[done : done + size] if size else messages[done:]
                if len(chunk) == 1:
                    if self._attempt_alone(chunk[0]):
                        done += 1
                        limit = None
                        self._commit(messages[:done])
                    else:  # waiting for its retry: the rest of its partition waits with it
                        waiting = (chunk[0].topic, chunk[0].partition)
                        messages = messages[:done] + [m for m in messages[done + 1 :] if (m.topic, m.partition) != waiting]
                        alone_until = done
                    continue
                count, failed_at = self._transaction(chunk)
                if failed_at is None:
                    self._log_handled(chunk[:count])
                    done += count
                    limit = None
                    self._commit(messages[:done])
                    if count < len(chunk):
                        break  # stop was requested mid-chunk
                elif self.spec.batch:
                    alone_until = done + len(chunk)  # a batch handler failed somewhere in it
                elif failed_at == 0:
                    alone_until = done + 1
                else:
                    limit = failed_at  # the messages before the failing one, without it
        except _Stopped:
            log.info("consumer.stop_before_dead_letter", consumer=self.spec.name, position=messages[done].position)
        except _DatabaseUnavailable as exc:
            log.warning("consumer.database_unavailable", consumer=self.spec.name, error=str(exc))
            self._rewind(messages[done:])
            self.stop.wait(2.0)

    def _transaction(self, chunk: list[Message]) -> tuple[int, int | None]:
        """Handle `chunk` in one transaction. Returns (handled, None) after a commit, or (0, index)
        when the message at index raised (everything rolled back)."""
        spec = self.spec
        count = 0
        unidentified = self._first_unidentified(chunk)
        if unidentified is not None:
            return 0, unidentified
        try:
            with transaction.atomic(using=spec.alias):
                fresh = self._claim([message.message_id for message in chunk])
                if spec.batch:
                    self._call_batch(chunk, fresh)
                    self.handled += len(chunk)
                    return len(chunk), None
                for index, message in enumerate(chunk):
                    if self.stop.is_set() and index:
                        self._unclaim(fresh)  # not handled: the next owner must not take them as done
                        break
                    if fresh is not None:
                        if message.message_id not in fresh:
                            log.info("consumer.replay_skipped", consumer=spec.name, messageId=message.message_id, position=message.position)
                            count += 1
                            continue
                        fresh.discard(message.message_id)
                    try:
                        self._call(message)
                    except Exception as exc:
                        self._raise_if_database_down(exc)
                        raise _HandlerFailed(index) from exc
                    count += 1
        except _HandlerFailed as failure:
            return 0, failure.index
        except (OperationalError, InterfaceError) as exc:
            # Outside a handler (the claim, the commit: a serialization failure): no message to
            # blame yet, so they are handled one at a time from the first.
            self._raise_if_database_down(exc)
            log.warning("consumer.transaction_failed", consumer=spec.name, error=f"{type(exc).__name__}: {exc}")
            return 0, 0
        self.handled += count
        return count, None

    def _attempt_alone(self, message: Message) -> bool:
        """One attempt at one message in its own transaction. True when it is done with (handled,
        skipped as a replay, or parked: its offset may be committed); False when it failed with
        retries left: its partition is paused and rewound to it until the retry is due."""
        spec = self.spec
        attempt = self.attempts.get(message.position, 0) + 1
        try:
            with transaction.atomic(using=spec.alias):
                fresh = self._claim([message.message_id])
                if fresh is not None and not fresh:
                    log.info("consumer.replay_skipped", consumer=spec.name, messageId=message.message_id, position=message.position)
                    self.attempts.pop(message.position, None)
                    return True
                self._call(message)
        except UndecodableMessage as exc:
            self._park(message, exc, attempt)
            return True
        except Exception as exc:
            self._raise_if_database_down(exc)
            if attempt > spec.max_retries or (attempt == 1 and not spec.idempotent and self._already_parked(message)):
                self._park(message, exc, attempt)
                return True
            self.attempts[message.position] = attempt
            delay = min(spec.retry_backoff_seconds * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS)
            log.warning(
                "consumer.handler_failed",
                consumer=spec.name,
                position=message.position,
                attempt=attempt,
                retryIn=delay,
                error=f"{type(exc).__name__}: {exc}",
            )
            self._retry_later(message, delay)
            return False
        self.attempts.pop(message.position, None)
        self.handled += 1
        self._log_handled([message])
        return True

    def _retry_later(self, message: Message, delay: float) -> None:
        partition = TopicPartition(message.topic, message.partition)
        self.consumer.seek(partition, message.offset)
        self.retry_at[partition] = (time.monotonic() + delay, message.offset)

    def _release_due(self) -> None:
        now = time.monotonic()
        for partition in [partition for partition, (due, _) in self.retry_at.items() if due <= now]:
            del self.retry_at[partition]

    def _poll_timeout_ms(self) -> int:
        if not self.retry_at:
            return POLL_TIMEOUT_MS
        soonest = min(due for due, _ in self.retry_at.values()) - time.monotonic()
        return max(0, min(POLL_TIMEOUT_MS, int(soonest * 1000) + 1))

    def forget(self, partitions) -> None:
        """The group took `partitions` away: their retry schedule goes with them."""
        for partition in partitions:
            self.retry_at.pop(partition, None)

    # ------------------------------------------------------------------ parking
    @staticmethod
    def _park_key(message: Message) -> str:
        """What a parked message is recorded under: its id (the key a redelivery is claimed by), or
        its position when it has none it can be identified by."""
        try:
            return message.message_id
        except UndecodableMessage:
            return message.position

    def _already_parked(self, message: Message) -> bool:
        key = self._park_key(message)
        if self.park_model is None:
            return key in self.parked
        return self.park_model.objects.using(self.spec.alias).filter(consumer=self.spec.name, message_id=key).exists()

    def _park(self, message: Message, exc: Exception, attempts: int) -> None:
        """Dead-letter the message once: recorded with the dead letter's acknowledgement (the record
        commits only once the broker acknowledged it), so a redelivery skips it."""
        self.attempts.pop(message.position, None)
        key = self._park_key(message)
        if self.park_model is None:
            if key in self.parked:
                log.info("consumer.already_parked", consumer=self.spec.name, position=message.position)
                return
            self._dead_letter(message, exc, attempts)
            self.parked.add(key)
            return
        try:
            with transaction.atomic(using=self.spec.alias):
                if not claim_messages(consumer=self.spec.name, message_ids=[key], using=self.spec.alias, model=self.park_model):
                    log.info("consumer.already_parked", consumer=self.spec.name, position=message.position)
                    return
                self._dead_letter(message, exc, attempts)
        except (OperationalError, InterfaceError) as error:
            self._raise_if_database_down(error)
            raise

    # ------------------------------------------------------------------ pieces
    def _log_handled(self, messages: list[Message]) -> None:
        """One line per committed transaction, naming the requests whose events it handled: a batch
        handler runs with no request bound (its messages may come from many), so this line is where
        a request's id shows in the consuming service's log."""
        if not messages:
            return
        request_ids = dict.fromkeys(filter(None, map(sane_request_id, (message.request_id for message in messages))))
        log.info("consumer.handled", consumer=self.spec.name, messages=len(messages), requestIds=",".join(request_ids))

    def _call(self, message: Message) -> None:
        token = bind_request_id(accept_request_id(message.request_id))
        try:
            self.spec.handler([message] if self.spec.batch else message)
        finally:
            reset_request_id(token)

    def _call_batch(self, chunk: list[Message], fresh: set[str] | None) -> None:
        """A batch handler gets the chunk's messages not processed before, in order, once each."""
        todo = []
        for message in chunk:
            if fresh is None or message.message_id in fresh:
                todo.append(message)
                if fresh is not None:
                    fresh.discard(message.message_id)
            else:
                log.info("consumer.replay_skipped", consumer=self.spec.name, messageId=message.message_id, position=message.position)
        if not todo:
            return
        try:
            self.spec.handler(todo)
        except Exception as exc:
            self._raise_if_database_down(exc)
            raise _HandlerFailed(0) from exc

    def _claim(self, message_ids: list[str]) -> set[str] | None:
        if not self.spec.idempotent:
            return None
        return claim_messages(consumer=self.spec.name, message_ids=message_ids, using=self.spec.alias, model=self.processed_model)

    def _unclaim(self, message_ids: set[str] | None) -> None:
        if message_ids:
            self.processed_model.objects.using(self.spec.alias).filter(consumer=self.spec.name, message_id__in=message_ids).delete()

    @staticmethod
    def _first_unidentified(chunk: list[Message]) -> int | None:
        """The index of the first message without an identity (parked at once when handled alone)."""
        for index, message in enumerate(chunk):
            try:
                message.message_id  # noqa: B018  (computed and cached here, where a failure is caught)
            except UndecodableMessage:
                return index
        return None

    def _raise_if_database_down(self, exc: Exception) -> None:
        if database_down(exc):
            connections[self.spec.alias].close()
            raise _DatabaseUnavailable(str(exc)) from exc

    def _dead_letter(self, message: Message, exc: Exception, attempts: int) -> None:
        """Park the message on <topic>.DLQ (value, key and headers as received, plus the error);
        wait for the acknowledgement, retrying while the broker is down, so nothing is dropped."""
        topic = dead_letter_topic(message.topic)
        headers = {
            **message.headers,
            "dlq.error": f"{type(exc).__name__}: {exc}"[:2000],
            "dlq.errorClass": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "dlq.topic": message.topic,
            "dlq.partition": str(message.partition),
            "dlq.offset": str(message.offset),
            "dlq.consumer": self.spec.name,
            "dlq.group": self.spec.group_id,
            "dlq.attempts": str(attempts),
            "dlq.failedAt": str(int(time.time() * 1000)),
        }
        key = message.key.encode() if message.key is not None else None
        value = message.raw_value
        failures = 0
        while True:
            try:
                get_producer().send(topic, value=value, key=key, headers=wire_headers(headers)).get(timeout=DEAD_LETTER_ACK_SECONDS)
                break
            except KafkaError as publish_error:
                if isinstance(publish_error, MessageSizeTooLargeError) and (value != b"" or len(headers) > len(DEAD_LETTER_HEADERS) + 1):
                    # The value with the dead-letter headers is over the record limit: park the record
                    # without its value (then without its own headers); it stays readable at its
                    # position while the topic retains it.
                    log.warning("consumer.dead_letter_too_large", consumer=self.spec.name, topic=topic, error=str(publish_error))
                    if value != b"":
                        value = b""
                    else:
                        headers = {name: headers[name] for name in DEAD_LETTER_HEADERS}
                    headers["dlq.valueOmitted"] = f"{len(message.raw_value or b'')} bytes, too large for the dead-letter topic"
                    continue
                failures += 1
                log.warning("consumer.dead_letter_failed", consumer=self.spec.name, topic=topic, error=str(publish_error))
                if self.stop.wait(min(2**failures, MAX_BACKOFF_SECONDS)):
                    raise _Stopped from publish_error
        self.dead_lettered += 1
        log.error(
            "consumer.dead_lettered",
            consumer=self.spec.name,
            position=message.position,
            deadLetterTopic=topic,
            messageId=message.headers.get("messageId") or message.position,
            attempts=attempts,
            error=f"{type(exc).__name__}: {exc}",
        )

    def _commit(self, handled: list[Message]) -> None:
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for message in handled:
            offsets[TopicPartition(message.topic, message.partition)] = OffsetAndMetadata(message.offset + 1, None, -1)
        try:
            self.consumer.commit(offsets)
        except CommitFailedError as exc:
            # The group rebalanced: the partition's new owner gets these again and skips them as replays.
            log.warning("consumer.commit_failed", consumer=self.spec.name, error=str(exc))

    def _rewind(self, unhandled: list[Message]) -> None:
        first: dict[TopicPartition, int] = {}
        for message in unhandled:
            first.setdefault(TopicPartition(message.topic, message.partition), message.offset)
        for partition, offset in first.items():
            if partition in self.consumer.assignment():
                self.consumer.seek(partition, offset)


class GroupRunner(ConsumerRunner):
    """The consumers of one group behind one Kafka consumer: each poll's records are handed, topic
    by topic, to the runner of the consumer that owns the topic (each keeps its own transactions,
    retries, dead letters and commits, on the shared Kafka consumer)."""

    def __init__(self, specs: list[ConsumerSpec], stop: threading.Event, *, consumer_factory: Callable[..., KafkaConsumer] = KafkaConsumer):
        groups = {(spec.group_id, spec.offset_reset) for spec in specs}
        if len(groups) != 1:
            raise ValueError(f"one group and offset reset per runner, got {sorted(groups)}")
        topics = [topic for spec in specs for topic in spec.topics]
        if len(set(topics)) != len(topics):
            raise ValueError(f"two consumers of {specs[0].group_id} read one topic: {sorted(topics)}")
        name = "+".join(spec.name for spec in specs)
        super().__init__(dataclasses.replace(specs[0], name=name, topics=tuple(topics)), stop, consumer_factory=consumer_factory)
        self.members = [ConsumerRunner(spec, stop, consumer_factory=consumer_factory) for spec in specs]
        for member in self.members:
            member.retry_at = self.retry_at  # one Kafka consumer: one schedule of held partitions
        self.owner = {topic: member for member in self.members for topic in member.spec.topics}

    def _session(self) -> None:
        spec = self.spec
        self.consumer = self.consumer_factory(**consumer_options(group_id=spec.group_id, offset_reset=spec.offset_reset))
        for member in self.members:
            member.consumer = self.consumer
        try:
            self._poll_loop(list(spec.topics), self._dispatch)
        finally:
            for member in self.members:
                member.consumer = None

    def _dispatch(self, batch: dict) -> None:
        by_member: dict[ConsumerRunner, dict] = {}
        for partition, records in batch.items():
            by_member.setdefault(self.owner[partition.topic], {})[partition] = records
        for member, records in by_member.items():
            if self.stop.is_set():
                break
            member.process_batch(records)
        self.handled = sum(member.handled for member in self.members)
        self.dead_lettered = sum(member.dead_lettered for member in self.members)


def runners_for(specs: list[ConsumerSpec], stop: threading.Event) -> list[ConsumerRunner]:
    """One runner per consumer group (and offset reset): a group of one is a plain ConsumerRunner."""
    groups: dict[tuple[str, str], list[ConsumerSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.group_id, spec.offset_reset), []).append(spec)
    return [ConsumerRunner(members[0], stop) if len(members) == 1 else GroupRunner(members, stop) for members in groups.values()]


class _Rebalances(ConsumerRebalanceListener):
    """Counts the runner's assignments and drops the retry schedule of partitions taken away."""

    def __init__(self, runner: ConsumerRunner):
        self.runner = runner

    def on_partitions_revoked(self, revoked):
        if revoked:
            log.info("consumer.partitions_revoked", consumer=self.runner.spec.name, partitions=len(revoked))
        self.runner.forget(revoked)

    def on_partitions_assigned(self, assigned):
        self.runner.assignments += 1
        log.info("consumer.partitions_assigned", consumer=self.runner.spec.name, partitions=len(assigned), times=self.runner.assignments)


def _processed_model_or_none(alias: str):
    try:
        return processed_model_for(alias)
    except ImproperlyConfigured:
        return None


class _HandlerFailed(Exception):
    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


def tune_interpreter() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)


def run_consumers(specs: list[ConsumerSpec], stop: threading.Event, *, extra_loops: list[Callable[[threading.Event], None]] = ()) -> None:
    """Run every consumer, one thread per group (and extra loops, such as the outbox relay), until `stop`."""
    tune_interpreter()
    threads = [threading.Thread(target=runner.run, name=f"consumer:{runner.spec.name}", daemon=True) for runner in runners_for(specs, stop)]
    threads += [threading.Thread(target=loop, args=(stop,), name=getattr(loop, "__name__", "loop"), daemon=True) for loop in extra_loops]
    for thread in threads:
        thread.start()
    while not stop.is_set() and any(thread.is_alive() for thread in threads):
        stop.wait(0.5)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
