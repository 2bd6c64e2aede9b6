"""The Celery app (Redis broker). Tasks are thin, take ids, are idempotent, and are acknowledged
late so a killed worker's task runs again. The requestId travels in the task headers.

Queues: each service's tasks go to the queue named after the service unless the task names one of
the spec's queues with the `named_queue` option (`@shared_task(named_queue=SYNC_PRODUCT_QUEUE)`;
Celery's own `queue` attribute is deprecated); kernel tasks go to `default`. A worker consumes the
queues of the services active in its process (`celery -A merchant_platform worker`), so in split
mode a worker never receives another service's task. Periodic jobs: `register_periodic_task()` from
a service's tasks.py, run by `celery -A merchant_platform beat` (one beat per deployment).
Services send their tasks by name with `send_task_on_commit()` (`send_task()` where the commit is
already behind them): a tasks module imports its service's services, never the reverse.
"""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery, signals
from django.db import transaction
from kombu import Queue

from merchant_platform.registry import active_services

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

DEFAULT_QUEUE = "default"
# The named queues of the spec (section 1.3), by the service whose tasks use them.
SYNC_PRODUCT_QUEUE = "SYNC_PRODUCT_QUEUE"
IDENTITY_MAIL_QUEUE = "IDENTITY_MAIL_QUEUE"
PAYMENT_SCHEDULER_QUEUE = "PAYMENT_SCHEDULER_QUEUE"
PAYMENT_CONFIRMATION_QUEUE = "PAYMENT_CONFIRMATION_QUEUE"
SERVICE_QUEUES: dict[str, tuple[str, ...]] = {
    "commerce": (SYNC_PRODUCT_QUEUE,),
    "identity": (IDENTITY_MAIL_QUEUE,),
    "payment": (PAYMENT_SCHEDULER_QUEUE, PAYMENT_CONFIRMATION_QUEUE),
}


def worker_queues() -> list[str]:
    """The queues a worker of this process consumes: `default`, and per active service its own
    queue and its named queues."""
    names = [DEFAULT_QUEUE]
    for service in active_services():
        names += [service.name, *SERVICE_QUEUES.get(service.name, ())]
    return names


def route_task(name, args, kwargs, options, task=None, **kw):
    """A task's `named_queue` if it has one; else a service's task (apps.<service>....) goes to the
    service's queue."""
    named_queue = getattr(task, "named_queue", None)
    if named_queue:
        return {"queue": named_queue}
    parts = name.split(".")
    if len(parts) > 2 and parts[0] == "apps":
        return {"queue": parts[1]}
    return None


app = Celery("merchant_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_serializer="json",
    accept_content=["json"],
    result_serializer="json",
    task_default_queue=DEFAULT_QUEUE,
    task_queues=[Queue(name) for name in worker_queues()],
    task_routes=(route_task,),
    broker_connection_retry_on_startup=True,
    # Django's LOGGING (key=value lines) stays in charge of the worker's logs.
    worker_hijack_root_logger=False,
    beat_schedule_filename=os.environ.get(
        "CELERY_BEAT_SCHEDULE_FILENAME", str(Path(__file__).resolve().parent.parent / "var" / "celerybeat-schedule")
    ),
)
app.autodiscover_tasks()
app.autodiscover_tasks(["merchant_platform.cdc", "merchant_platform.messaging"])


def register_periodic_task(name: str, *, task: str, schedule, args: tuple = (), **options) -> None:
    """Run `task` every `schedule` (seconds, a timedelta or a celery.schedules.crontab) under beat."""
    app.conf.beat_schedule = {
        **(app.conf.beat_schedule or {}),
        name: {"task": task, "schedule": schedule, "args": args, "options": options},
    }


def send_task(name: str, args: tuple | list = (), **options) -> None:
    """Send the task `name` with `args` now, by name, so services never import their tasks modules.
    Where the task is registered (a worker, or a process that imported it) it is sent through it
    (its `named_queue`, task_always_eager); elsewhere by name, routed by `route_task`, so a task
    with a named queue gives it here as `queue`. `options` are apply_async's."""
    app.signature(name, args=tuple(args), **options).apply_async()


def send_task_on_commit(name: str, args: tuple | list = (), *, using: str, **options) -> None:
    """`send_task` once the transaction open on the database `using` commits (at once when none is
    open, raising what the send raises), so the worker reads what the caller wrote and a
    rolled-back change sends nothing."""
    transaction.on_commit(lambda: send_task(name, args, **options), using=using)


@signals.before_task_publish.connect
def _attach_request_id(headers=None, **_):
    from merchant_platform.context import current_request_id

    if headers is not None and "requestId" not in headers:
        headers["requestId"] = current_request_id()


@signals.task_prerun.connect
def _bind_request_id(task=None, **_):
    from merchant_platform.context import bind_request_id, new_request_id

    request_id = getattr(task.request, "requestId", None) if task else None
    bind_request_id(request_id or new_request_id())


@signals.worker_process_init.connect
def _start_pool_process(**_):
    from merchant_platform.lifecycle import process_start
    from merchant_platform.messaging.outbox import relay_inline

    process_start("celery-worker")
    relay_inline()  # the fixup closes the database pools around every task here


@signals.worker_process_shutdown.connect
def _leave_cleanly(**_):
    # A pool process leaves through os._exit, which skips atexit: publish the room sends it queued
    # and give back its worker id now rather than when the lease lapses. (Not every atexit handler:
    # the process inherited its parent's too.)
    from merchant_platform import realtime, snowflake

    realtime.flush()
    snowflake.release()
