"""`manage.py inventory_periodic`: inventory's periodic work without Celery (spec 1.3, Redis
optional). Celery's broker is Redis, so while Redis is down beat sends nothing; this process runs the
same two tasks in process, each at its beat interval: the release of expired reservations
(INVENTORY_RESERVATION_SWEEP_SECONDS) and the consumer-lag check (INVENTORY_CONSUMER_LAG_CHECK_SECONDS).
Both are safe to run beside beat (each expiry takes the order's lock; the lag check only reads), so
it may run all the time or only during an outage. `--once` runs each task once and exits. SIGTERM or
SIGINT ends the loop between runs. docs/services/inventory.md, "Without Redis".
"""

from __future__ import annotations

import signal
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.inventory import tasks
from merchant_platform.lifecycle import process_start
from merchant_platform.logging import get_logger

log = get_logger(__name__)

# (task, the setting holding its interval in seconds): the schedule tasks.py gives beat.
SCHEDULE = (
    (tasks.expire_reservations, "INVENTORY_RESERVATION_SWEEP_SECONDS"),
    (tasks.check_consumer_lag, "INVENTORY_CONSUMER_LAG_CHECK_SECONDS"),
)


def run_task(task) -> None:
    """Run one task here (the task's own function, not a message to a worker); a failure is logged
    and the next run comes at its interval, as under beat."""
    try:
        task()
    except Exception as exc:  # one failed run (the broker away for the lag check) must not end the loop
        log.exception("inventory.periodic_failed", task=task.name, error=type(exc).__name__)


class Command(BaseCommand):
    help = "Run inventory's periodic tasks (reservation expiry, consumer-lag check) in process, without Celery, until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="run each task once and exit")

    def handle(self, *args, once: bool, **options):
        process_start("periodic")
        if once:
            for task, _ in SCHEDULE:
                run_task(task)
            return
        stop = threading.Event()

        def request_stop(signum, frame):
            log.info("inventory.periodic_stop_requested", signal=signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        due = dict.fromkeys((task for task, _ in SCHEDULE), time.monotonic())
        while not stop.is_set():
            for task, interval in SCHEDULE:
                if time.monotonic() >= due[task]:
                    run_task(task)
                    due[task] = time.monotonic() + getattr(settings, interval)
            stop.wait(max(0.0, min(due.values()) - time.monotonic()))
        log.info("inventory.periodic_exit")
