"""What every long-running process does once at start, whatever its role (web, worker, consumer).

It refuses to start (one line on stderr, exit status 1) when the configuration cannot work:
a service whose broker is mandatory with an empty broker list (spec 7), or a snowflake worker id
that another live process holds (spec 1.2.3).
"""

from __future__ import annotations

import sys

from django.conf import settings

from merchant_platform import snowflake
from merchant_platform.logging import get_logger
from merchant_platform.services import active_services

log = get_logger(__name__)


def refuse(message: str) -> None:
    sys.stderr.write(f"merchant-platform: {message}\n")
    sys.stderr.flush()
    raise SystemExit(1)


def check_required_configuration() -> None:
    for service in active_services():
        if service.broker_required and not [s for s in settings.KAFKA_BOOTSTRAP_SERVERS if s.strip()]:
            refuse(f"{service.name} needs a message broker but KAFKA_BOOTSTRAP_SERVERS is empty; refusing to start")


def process_start(role: str) -> None:
    """Validate configuration and lease the snowflake worker id for this process."""
    check_required_configuration()
    try:
        generator = snowflake.claim()
    except snowflake.WorkerIdCollision as exc:
        refuse(str(exc.code).removeprefix("merchant-platform: "))
    log.info("process.start", role=role, services=",".join(s.name for s in active_services()), workerId=generator.worker_id)
