"""`manage.py consume`: run the Kafka consumers of this process's services, and the outbox relay.

In all-in-one mode every service's consumers run (or those of --service); in split mode those of
APP_SERVICE. Each consumer runs in its group (SVC-00050-INVENTORY_CONSUMER_GROUP...) on a thread of
its own. SIGTERM or SIGINT finishes the message in hand, commits it and exits.
"""

from __future__ import annotations

import signal
import threading

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from merchant_platform.lifecycle import process_start
from merchant_platform.logging import get_logger
from merchant_platform.messaging.outbox import relay_loop
from merchant_platform.messaging.producer import close_producer
from merchant_platform.messaging.registry import registered_consumers
from merchant_platform.messaging.runner import run_consumers
from merchant_platform.messaging.stores import outbox_models
from merchant_platform.registry import active_services

log = get_logger(__name__)


class Command(BaseCommand):
    help = "Run the Kafka consumers (and the transactional-outbox relay) of the active services until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--service", action="append", default=[], help="only this service's consumers and outbox (repeatable)")
        parser.add_argument("--consumer", action="append", default=[], help="only this consumer, by registered name (repeatable)")
        parser.add_argument("--no-relay", action="store_true", help="do not run the outbox relay in this process")
        parser.add_argument("--list", dest="list_only", action="store_true", help="print the registered consumers and exit")

    def handle(self, *args, service, consumer, no_relay, list_only, **options):
        active = {s.name for s in active_services()}
        unknown = set(service) - active
        if unknown:
            raise CommandError(f"not an active service here: {', '.join(sorted(unknown))} (active: {', '.join(sorted(active))})")
        try:
            specs = registered_consumers(services=set(service) or None, names=set(consumer) or None)
        except LookupError as exc:
            raise CommandError(str(exc)) from exc
        if list_only:
            for spec in specs:
                self.stdout.write(f"{spec.name}\tgroup={spec.group_id}\ttopics={','.join(spec.topics)}\toffsetReset={spec.offset_reset}")
            return
        process_start("consumer")
        aliases = {s.db_alias for s in active_services() if not service or s.name in service}
        relayed = [] if no_relay or consumer else outbox_models(aliases | ({"default"} if not service else set()))
        if not specs and not relayed:
            self.stdout.write("nothing to consume: no registered consumer and no outbox table for these services")
            return
        loops = [lambda stop, models=relayed: relay_loop(models, stop)] if relayed else []

        stop = threading.Event()

        def request_stop(signum, frame):
            log.info("consume.stop_requested", signal=signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        log.info("consume.start", consumers=",".join(s.name for s in specs), outboxTables=",".join(m._meta.db_table for m in relayed))
        try:
            run_consumers(specs, stop, extra_loops=loops)
        except ImproperlyConfigured as exc:  # e.g. an idempotent consumer without a ProcessedMessage table
            raise CommandError(str(exc)) from exc
        finally:
            close_producer()
        log.info("consume.exit")
