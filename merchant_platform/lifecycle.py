"""What every long-running process does once at start, whatever its role (web, worker, consumer).

It refuses to start (one line on stderr, exit status 1) when the configuration cannot work:
a service whose broker is mandatory with an empty broker list (spec 7), a snowflake worker id that
another live process holds (spec 1.2.3), or a Redis that does not answer, unless every service of
the process runs without Redis (inventory, spec 1.3: its lease is then held in PostgreSQL). At the
end it releases what it took (process_stop): through atexit, or through the ASGI lifespan
(`lifespan`) in the ASGI server, whose process uvicorn ends by re-raising the stopping signal, so
that no atexit hook runs there.
"""

from __future__ import annotations

import asyncio
import atexit
import sys
from urllib.parse import urlsplit

import psycopg
import redis
from django.apps import apps
from django.conf import settings
from django.db import connections

from merchant_platform import snowflake
from merchant_platform.logging import get_logger
from merchant_platform.registry import active_services
from merchant_platform.verification.jwks import jwks_cache

log = get_logger(__name__)


def refuse(message: str) -> None:
    sys.stderr.write(f"merchant-platform: {message}\n")
    sys.stderr.flush()
    raise SystemExit(1)


def check_required_configuration() -> None:
    for service in active_services():
        if service.broker_required and not [s for s in settings.KAFKA_BOOTSTRAP_SERVERS if s.strip()]:
            refuse(f"{service.name} needs a message broker but KAFKA_BOOTSTRAP_SERVERS is empty; refusing to start")
        # A service may declare `configuration_problem()` on its AppConfig (identity: its signing keypair).
        configuration_problem = getattr(apps.get_app_config(service.app_label), "configuration_problem", None)
        problem = configuration_problem() if configuration_problem else None
        if problem:
            refuse(f"{service.name}: {problem}; refusing to start")


def close_database_pools() -> None:
    """Close the psycopg pools while the process is whole: left to the interpreter's finalization,
    each pool waits about a second for its threads, and a server with eleven aliases stops slowly."""
    for connection in connections.all():
        close_pool = getattr(connection, "close_pool", None)
        if close_pool:
            close_pool()


def process_start(role: str) -> None:
    """Validate configuration and lease the snowflake worker id for this process."""
    atexit.register(close_database_pools)
    check_required_configuration()
    try:
        generator = snowflake.claim()
    except snowflake.WorkerIdCollision as exc:
        refuse(str(exc.code).removeprefix("merchant-platform: "))
    except redis.RedisError as exc:
        where = urlsplit(settings.REDIS_URL)  # host and port only: the URL may carry a password
        refuse(f"cannot lease a snowflake worker id: Redis at {where.hostname}:{where.port or 6379} does not answer ({exc})")
    except psycopg.Error as exc:  # a process without Redis leases in PostgreSQL (snowflake.JointLease)
        refuse(f"cannot lease a snowflake worker id in PostgreSQL ({type(exc).__name__})")
    jwks_cache.warm_up()
    log.info("process.start", role=role, services=",".join(s.name for s in active_services()), workerId=generator.worker_id)


def process_stop() -> None:
    """Give back what process_start took: the snowflake lease (else it stays in Redis until its TTL
    runs out) and the database pools. Safe to run twice (atexit may follow)."""
    snowflake.release()
    close_database_pools()


async def lifespan(scope, receive, send) -> None:
    """The ASGI lifespan protocol of the ASGI server (merchant_platform.asgi): process_stop at shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await asyncio.to_thread(process_stop)
            log.info("process.stop", role="ws")
            await send({"type": "lifespan.shutdown.complete"})
            return
