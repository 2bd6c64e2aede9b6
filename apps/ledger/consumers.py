"""The bridge (worker role, spec 1.4, 6.2): ledger.generate -> the job PROCESSING -> a Celery run.

The handler marks the job PROCESSING (one conditional UPDATE, committed) and queues its run with
late acknowledgement before it returns; the runner commits the offset only then (docs/architecture.md
section 6). A duplicate message finds the job no longer PENDING and does nothing. A crash between
the commit and the queueing leaves a PROCESSING job without a run: the sweep returns it to PENDING."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from apps.ledger import services
from apps.ledger.tasks import generate_ledger
from merchant_platform.context import current_request_id
from merchant_platform.errors import InvalidInput
from merchant_platform.messaging import Message, consumer, topics


def ledger_generate(message: Message) -> None:
    value = message.value
    ledger_id = value.get("ledgerId") if isinstance(value, dict) else None
    if not isinstance(ledger_id, str) or not ledger_id.isdigit():
        raise InvalidInput({"ledgerId": "The message names no ledger job."})  # parked after the runner's retries
    run_id = services.job_start(ledger_id=int(ledger_id))
    if run_id is not None:
        # Queued once PROCESSING has committed (the runner's transaction), before the offset moves;
        # the message's requestId goes along explicitly (the callback runs after the handler's scope).
        headers = {"requestId": current_request_id()}
        transaction.on_commit(lambda: generate_ledger.apply_async((int(ledger_id), str(run_id)), headers=headers), using=services.DB)


if "worker" in settings.APP_ENV_APPLICATION_ROLES:
    # Not idempotent by message id: job_start is (only a PENDING job starts), which also covers the
    # sweep's and retry's new messages for the same job.
    consumer("ledger.generate", topics=[topics.LEDGER_GENERATE], idempotent=False)(ledger_generate)
