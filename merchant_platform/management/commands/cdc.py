"""`manage.py cdc`: relay row changes of the captured tables from the PostgreSQL WAL to Kafka as
Debezium change events (docs/events.md). SIGTERM stops it after the batch in hand."""

from __future__ import annotations

import json
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from prometheus_client import start_http_server

from merchant_platform.cdc.captures import Capture, default_slot_name, service_captures
from merchant_platform.cdc.relay import SNAPSHOT_MODES, CdcConfigurationError, CdcRelay, connect, drop_slot, slot_lag
from merchant_platform.lifecycle import process_start
from merchant_platform.logging import get_logger
from merchant_platform.messaging.contracts import ContractViolation
from merchant_platform.messaging.producer import close_producer
from merchant_platform.registry import active_services

log = get_logger(__name__)


class Command(BaseCommand):
    help = "Relay captured tables' row changes from the WAL to Kafka (Debezium envelopes), or report/drop the slot."

    def add_arguments(self, parser):
        parser.add_argument("--service", help="the capturing service (default: every active service that declares captures)")
        parser.add_argument("--slot", help="replication slot name (default: CDC_SLOT_NAME, else mp_cdc_<service>)")
        parser.add_argument("--database", help="database alias to read (default: the service's alias)")
        parser.add_argument(
            "--capture",
            action="append",
            default=[],
            metavar="TABLE=TOPIC",
            help="capture TABLE to TOPIC instead of the service's declarations",
        )
        parser.add_argument(
            "--snapshot", choices=SNAPSHOT_MODES, default=settings.CDC_SNAPSHOT_MODE, help="initial (default), always or never"
        )
        parser.add_argument("--batch-size", type=int, default=20_000, help="messages read from the slot per batch (whole transactions)")
        parser.add_argument(
            "--status", action="store_true", help="print the slot's lag as JSON; exit 1 above CDC_MAX_LAG_BYTES or if missing"
        )
        parser.add_argument("--drop-slot", action="store_true", help="drop the slot and its publication (the WAL it held is released)")

    def _relays(self, options) -> list[CdcRelay]:
        services = [s for s in active_services() if not options["service"] or s.name == options["service"]]
        if options["service"] and not services:
            raise CommandError(f"{options['service']} is not an active service here")
        relays = []
        for service in services:
            if options["capture"]:
                captures = []
                for item in options["capture"]:
                    table, sep, topic = item.partition("=")
                    if not sep or not table or not topic:
                        raise CommandError(f"--capture takes TABLE=TOPIC, got {item!r}")
                    captures.append(Capture(topic=topic, table=table))
            else:
                captures = service_captures(service)
            if not captures:
                continue
            slot = options["slot"] or settings.CDC_SLOT_NAME or default_slot_name(service)
            relays.append(
                CdcRelay(
                    alias=options["database"] or service.db_alias,
                    slot=slot,
                    captures=captures,
                    snapshot_mode=options["snapshot"],
                    batch_size=options["batch_size"],
                    server_name=service.name,
                    poll_interval=settings.CDC_POLL_INTERVAL_SECONDS,
                )
            )
            if options["capture"]:
                break  # explicit captures describe one relay
        if len({relay.slot for relay in relays}) != len(relays):
            raise CommandError("two capturing services would share one slot; give --service and --slot per relay")
        return relays

    def handle(self, *args, **options):
        relays = self._relays(options)
        if not relays:
            self.stdout.write("nothing to capture: no active service declares CAPTURES in its cdc.py (and no --capture)")
            return
        if options["status"] or options["drop_slot"]:
            return self._administer(relays, drop=options["drop_slot"])
        process_start("cdc")
        if settings.CDC_METRICS_PORT:
            start_http_server(settings.CDC_METRICS_PORT, addr="127.0.0.1")
        stop = threading.Event()

        def request_stop(signum, frame):
            log.info("cdc.stop_requested", signal=signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        threads = [threading.Thread(target=self._run, args=(relay, stop), name=f"cdc:{relay.slot}", daemon=True) for relay in relays]
        for thread in threads:
            thread.start()
        while not stop.is_set() and any(thread.is_alive() for thread in threads):
            stop.wait(0.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        close_producer()
        if getattr(self, "_failure", None):
            raise CommandError(self._failure)

    def _run(self, relay: CdcRelay, stop: threading.Event) -> None:
        try:
            relay.run(stop)
        except (CdcConfigurationError, ContractViolation) as exc:
            self._failure = str(exc)
            stop.set()

    def _administer(self, relays: list[CdcRelay], *, drop: bool) -> None:
        too_far = False
        for relay in relays:
            with connect(relay.alias) as connection:
                if drop:
                    drop_slot(connection, relay.slot)
                    self.stdout.write(f"dropped slot {relay.slot} and its publication")
                    continue
                state = slot_lag(connection, relay.slot) or {"slot": relay.slot, "missing": True}
            state["maxLagBytes"] = settings.CDC_MAX_LAG_BYTES
            too_far |= state.get("missing", False) or state["lagBytes"] > settings.CDC_MAX_LAG_BYTES
            self.stdout.write(json.dumps(state))
        if too_far:
            raise SystemExit(1)
