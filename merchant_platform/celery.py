"""The Celery app (Redis broker). Tasks are thin, take ids, are idempotent, and are acknowledged
late so a killed worker's task runs again. The requestId travels in the task headers."""

from __future__ import annotations

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

app = Celery("merchant_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_serializer="json",
    accept_content=["json"],
    result_serializer="json",
    task_default_queue="default",
    broker_connection_retry_on_startup=True,
    broker_transport_options={"visibility_timeout": 3600},
)
app.autodiscover_tasks()


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
def _lease_worker_id(**_):
    from merchant_platform.lifecycle import process_start

    process_start("celery-worker")
