"""Every write of the ledger service (docs/services/ledger.md). Functions take ids, open
`transaction.atomic(using=DB)` and raise the kernel's errors. Writes: LedgerJob rows (through
conditional UPDATEs, so two workers never run one job at once), ledger.generate events through the
outbox, job-status notifications to the merchant's ledger room, and objects in the ledger bucket.

Job states: PENDING -> PROCESSING (job_start, by the bridge consumer) -> COMPLETED (job_run) or
REJECTED (job_run: FETCH_DATA_ERROR or JOB_EXECUTION_FAILED). job_retry (REJECTED) and
job_regenerate (a COMPLETED draft) return a job to PENDING and publish it again; job_sweep returns a
PROCESSING job whose run has not beaten its heartbeat for APP_ENV_JOB_TIMEOUT_MS to PENDING and
publishes it again, or REJECTS it (JOB_EXECUTION_FAILED) after LEDGER_MAX_ATTEMPTS runs (and
publishes again a job PENDING for that long)."""

from __future__ import annotations

import datetime
import re
import tempfile
import time
import uuid
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.ledger import documents, storage
from apps.ledger.models import LedgerJob
from merchant_platform import crypto, realtime, references
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger
from merchant_platform.messaging import publish, topics

DB = "ledger"
log = get_logger(__name__)
Status = LedgerJob.Status
KEY_PURPOSE = "ledger-data-key"
STATUS_EVENT = "ledger.job.status"
FETCH_DATA_ERROR, JOB_EXECUTION_FAILED = "FETCH_DATA_ERROR", "JOB_EXECUTION_FAILED"
MONTH = re.compile(r"^(\d{4})-(\d{2})$")
QUARTER = re.compile(r"^(\d{4})-Q([1-4])$")
RANGE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.\.(\d{4}-\d{2}-\d{2})$")


def ledger_room(merchant_id: int) -> str:
    """The merchant's ledger room: under `merchant.<id>`, so signal lets the merchant's users join it
    (docs/services/signal.md, "Rooms"), as payment's `merchant.<id>.payment`."""
    return f"merchant.{merchant_id}.ledger"


def today() -> datetime.date:
    return timezone.now().date()


def period_dates(period: str) -> tuple[datetime.date, datetime.date]:
    """The first and last day of `period`: YYYY-MM (a month), YYYY-Qn (a quarter) or
    YYYY-MM-DD..YYYY-MM-DD (a custom range of at most LEDGER_MAX_PERIOD_DAYS days)."""
    try:
        if match := MONTH.match(period):
            year, month = int(match[1]), int(match[2])
            first = datetime.date(year, month, 1)
        elif match := QUARTER.match(period):
            year, month = int(match[1]), 3 * int(match[2]) - 2
            first = datetime.date(year, month, 1)
            month += 2
        elif match := RANGE.match(period):
            first, last = datetime.date.fromisoformat(match[1]), datetime.date.fromisoformat(match[2])
            if last < first:
                raise InvalidInput({"period": "The range ends before it starts."})
            if (last - first).days + 1 > settings.LEDGER_MAX_PERIOD_DAYS:
                raise InvalidInput({"period": f"A custom period spans at most {settings.LEDGER_MAX_PERIOD_DAYS} days."})
            return first, last
        else:
            raise InvalidInput({"period": "Give YYYY-MM, YYYY-Qn or YYYY-MM-DD..YYYY-MM-DD."})
        following = datetime.date(year + month // 12, month % 12 + 1, 1)
        return first, following - datetime.timedelta(days=1)
    except ValueError:
        raise InvalidInput({"period": "Not a calendar date."}) from None


def _notify(job: LedgerJob) -> None:
    """notifyJobStatus (spec 6.2): the new status to the merchant's ledger room, after the commit."""
    payload = {
        "ledgerId": str(job.id),
        "merchantId": str(job.merchant_id),
        "status": job.status,
        "attemptCount": job.attempt_count,
        "draft": job.draft,
        "errorCode": job.error_code or None,
    }
    realtime.broadcast(ledger_room(job.merchant_id), STATUS_EVENT, payload, using=DB)


def _enqueue(job: LedgerJob) -> None:
    """ledger.generate keyed by the job id, through the outbox: the message exists if and only if
    the PENDING row committed, and the relay sends it whenever the broker takes it."""
    publish(str(topics.LEDGER_GENERATE), {"ledgerId": str(job.id)}, event_type="ledger.generate", using=DB, key=str(job.id))


def job_create(
    *,
    merchant_id: int,
    type: str,
    format: str,
    period: str,
    account_id: int | None = None,
    created_by: int | None = None,
) -> LedgerJob:
    date_from, date_to = period_dates(period)
    if date_from > today():
        raise InvalidInput({"period": "The period has not started yet."})
    if type == LedgerJob.Type.ACCOUNT_STATEMENT and account_id is None:
        raise InvalidInput({"accountId": "An account statement names its account."})
    if type != LedgerJob.Type.ACCOUNT_STATEMENT and account_id is not None:
        raise InvalidInput({"accountId": "Only an account statement names an account."})
    if account_id is not None:
        # The caller's value: finance says whether the account is the merchant's (400, or 503
        # while finance cannot answer), before anything is queued.
        references.check_owned(
            field="accountId",
            url=f"{settings.LEDGER_FINANCE_URL.rstrip('/')}/accounts/{account_id}",
            merchant_id=merchant_id,
            what="finance account",
        )
    with transaction.atomic(using=DB):
        job = LedgerJob.objects.using(DB).create(
            merchant_id=merchant_id,
            type=type,
            format=format,
            period=period,
            date_from=date_from,
            date_to=date_to,
            account_id=account_id,
            created_by=created_by,
            queued_at=timezone.now(),
        )
        _enqueue(job)
        _notify(job)
    log.info("ledger.job_enqueued", ledgerId=str(job.id), merchantId=str(merchant_id), type=type, format=format)
    return job


def _locked(ledger_id: int) -> LedgerJob:
    job = LedgerJob.objects.using(DB).select_for_update().filter(pk=ledger_id).first()
    if job is None:
        raise NotFound("No such ledger job.", code="LEDGER_NOT_FOUND")
    return job


def _requeue(job: LedgerJob, *, asked: bool) -> LedgerJob:
    """Back to PENDING and published again; `asked` (retry, regenerate) starts a new count of runs
    for LEDGER_MAX_ATTEMPTS, the sweep's requeue does not."""
    job.status, job.run_id, job.queued_at = Status.PENDING, None, timezone.now()
    job.error_code = job.error_message = ""
    if asked:
        job.runs_since_request = 0
    fields = ["status", "run_id", "queued_at", "error_code", "error_message", "runs_since_request", "updated_at"]
    job.save(using=DB, update_fields=fields)
    _enqueue(job)
    _notify(job)
    return job


def _refuse_in_progress(job: LedgerJob) -> None:
    if job.status in (Status.PENDING, Status.PROCESSING):
        raise Conflict("The job is still running.", code="JOB_IN_PROGRESS", extra={"jobStatus": job.status})


def job_retry(*, ledger_id: int) -> LedgerJob:
    """Run a REJECTED job again."""
    with transaction.atomic(using=DB):
        job = _locked(ledger_id)
        _refuse_in_progress(job)
        if job.status != Status.REJECTED:
            raise Conflict(
                "Only a failed job is retried; regenerate a draft instead.", code="JOB_NOT_FAILED", extra={"jobStatus": job.status}
            )
        return _requeue(job, asked=True)


def job_regenerate(*, ledger_id: int) -> LedgerJob:
    """Render a DRAFT document again (its period was open, so its figures may have changed)."""
    with transaction.atomic(using=DB):
        job = _locked(ledger_id)
        _refuse_in_progress(job)
        if job.status != Status.COMPLETED or not job.draft:
            raise Conflict("Only a completed draft is regenerated.", code="LEDGER_NOT_DRAFT", extra={"jobStatus": job.status})
        return _requeue(job, asked=True)


def job_start(*, ledger_id: int) -> uuid.UUID | None:
    """PENDING -> PROCESSING for one run (one conditional UPDATE: of two workers, one wins). Returns
    the run's id, or None when the job is not PENDING (a duplicate message, a finished job)."""
    run_id = uuid.uuid4()
    with transaction.atomic(using=DB):
        started = (
            LedgerJob.objects.using(DB)
            .filter(pk=ledger_id, status=Status.PENDING)
            .update(
                status=Status.PROCESSING,
                run_id=run_id,
                attempt_count=F("attempt_count") + 1,
                runs_since_request=F("runs_since_request") + 1,
                started_at=timezone.now(),
                heartbeat_at=timezone.now(),
                updated_at=timezone.now(),
            )
        )
        if not started:
            return None
        _notify(LedgerJob.objects.using(DB).get(pk=ledger_id))
    return run_id


class RunLost(Exception):
    """The run no longer owns its job (the sweep took it back): it stops where it is."""


@dataclass
class _Run:
    job: LedgerJob
    run_id: uuid.UUID
    beat_every: float = field(default_factory=lambda: settings.LEDGER_HEARTBEAT_INTERVAL_MS / 1000)
    last_beat: float = field(default_factory=time.monotonic)

    def phase(self, name: str, **fields) -> None:
        log.info("ledger.pipeline", phase=name, ledgerId=str(self.job.id), runId=str(self.run_id), **fields)

    def beat(self, *, now: bool = False) -> None:
        """Refresh the job's heartbeat (at most every LEDGER_HEARTBEAT_INTERVAL_MS unless `now`),
        only while this run owns the job: a run the sweep took back raises RunLost. The heartbeat
        follows the work itself, so a worker stuck anywhere stops beating and is swept."""
        moment = time.monotonic()
        if not now and moment - self.last_beat < self.beat_every:
            return
        self.last_beat = moment
        owned = (
            LedgerJob.objects.using(DB)
            .filter(pk=self.job.id, status=Status.PROCESSING, run_id=self.run_id)
            .update(heartbeat_at=timezone.now())
        )
        if not owned:
            raise RunLost()

    def beating(self, items: Iterable) -> Iterator:
        for item in items:
            self.beat()
            yield item


def _finish(run: _Run, **changes) -> bool:
    """Apply `changes` if the run still owns the job (the sweep may have handed it to another run)."""
    with transaction.atomic(using=DB):
        done = (
            LedgerJob.objects.using(DB)
            .filter(pk=run.job.id, status=Status.PROCESSING, run_id=run.run_id)
            .update(**changes, updated_at=timezone.now())
        )
        if done:
            _notify(LedgerJob.objects.using(DB).get(pk=run.job.id))
    return bool(done)


def _fail(run: _Run, code: str, message: str) -> None:
    run.phase("FAILED", errorCode=code, reason=message)
    _finish(run, status=Status.REJECTED, error_code=code, error_message=message[:500], failed_at=timezone.now())


def object_key(job: LedgerJob, run_id: uuid.UUID) -> str:
    """Each run writes its own object; the job names it only once COMPLETED, so a run killed or
    failed mid-upload never leaves anything under the key a download reads."""
    return f"merchants/{job.merchant_id}/ledgers/{job.id}/{run_id.hex}.bin"


def _associated_data(job_id: int, key: str) -> bytes:
    return f"ledger-document:{job_id}:{key}".encode()


def job_run(*, ledger_id: int, run_id: str) -> bool:
    """The pipeline of one run: fetch finance's lines, render, encrypt under a fresh data key,
    upload, COMPLETED. Returns whether this run completed the job. Idempotent: a run that no longer
    owns its job (finished, swept, another run) does nothing."""
    run_uuid = uuid.UUID(str(run_id))
    job = LedgerJob.objects.using(DB).filter(pk=ledger_id, status=Status.PROCESSING, run_id=run_uuid).first()
    if job is None:
        log.info("ledger.run_skipped", ledgerId=str(ledger_id), runId=str(run_uuid))
        return False
    run = _Run(job, run_uuid)
    draft = job.date_to >= today()
    heading = documents.Heading(
        title=documents.TITLES[job.type],
        merchant_id=job.merchant_id,
        period=job.period,
        date_from=job.date_from,
        date_to=job.date_to,
        draft=draft,
        generated_at=timezone.now(),
        account_id=job.account_id,
    )
    render, _content_type, _extension = documents.RENDERERS[job.format]
    stats = documents.FetchStats()
    key = object_key(job, run_uuid)
    try:
        with tempfile.TemporaryFile() as plain, tempfile.TemporaryFile() as sealed:
            run.phase("FETCH_STARTED")
            entries = run.beating(
                documents.fetch_entries(merchant_id=job.merchant_id, date_from=job.date_from, date_to=job.date_to, stats=stats)
            )
            columns, rows = documents.rows_for(job.type, entries, account_id=job.account_id)
            run.phase("GENERATE_STARTED", format=job.format)
            render(heading, columns, rows, plain)  # pulls export pages as it writes
            run.phase("FETCH_DONE", pages=stats.pages, entries=stats.entries)
            plain_bytes = plain.tell()
            run.phase("GENERATE_DONE", bytes=plain_bytes)
            run.beat(now=True)
            data_key = documents.new_data_key()
            size = documents.encrypt_file(plain, sealed, key=data_key, associated_data=_associated_data(job.id, key))
            run.beat(now=True)
            storage.upload(key, sealed)
            run.phase("UPLOAD_DONE", bytes=size)
    except RunLost:
        log.warning("ledger.run_lost", ledgerId=str(job.id), runId=str(run_uuid))
        return False
    except documents.FetchFailed as exc:
        _fail(run, FETCH_DATA_ERROR, str(exc))
        return False
    except Exception as exc:  # render, encrypt or upload: the job fails, the worker lives on
        log.exception("ledger.pipeline_error", ledgerId=str(job.id), error=type(exc).__name__)
        _fail(run, JOB_EXECUTION_FAILED, f"Generation failed ({type(exc).__name__}); retry the job.")
        return False
    wrapped = crypto.encrypt(data_key, purpose=KEY_PURPOSE, associated_data=str(job.id).encode())
    previous = job.object_key
    completed = _finish(
        run,
        status=Status.COMPLETED,
        draft=draft,
        object_key=key,
        wrapped_key=wrapped,
        content_length=plain_bytes,
        completed_at=timezone.now(),
        error_code="",
        error_message="",
    )
    if not completed:  # the sweep gave the job to another run meanwhile: this object is nobody's
        _discard(key)
        return False
    run.phase("COMPLETED", draft=draft)
    if previous and previous != key:  # a regenerated draft replaces the previous document
        _discard(previous)
    return True


def _discard(key: str) -> None:
    try:
        storage.delete(key)
    except storage.StorageFailed:
        log.warning("ledger.object_left_behind", objectKeyHash=crypto.mac(key.encode(), purpose="ledger-object-key"))


@dataclass(frozen=True)
class Document:
    filename: str
    content_type: str
    content_length: int | None
    chunks: Iterator[bytes]


def job_download(*, ledger_id: int) -> Document:
    """The decrypted document of a COMPLETED job: `chunks` reads the object from storage as it is
    consumed and yields each chunk once it authenticated (close it to release the connection). The
    data key and the first chunk are checked here, so a document that does not open is
    DECRYPT_FAILED before any byte; damage found further on raises DECRYPT_FAILED from `chunks`
    after the authentic chunks before it (a response is then cut short of its Content-Length)."""
    job = LedgerJob.objects.using(DB).filter(pk=ledger_id).first()
    if job is None:
        raise NotFound("No such ledger job.", code="LEDGER_NOT_FOUND")
    if job.status != Status.COMPLETED:
        raise Conflict("The document is not ready.", code="JOB_NOT_READY", extra={"jobStatus": job.status})
    data_key = crypto.decrypt_bytes(job.wrapped_key, purpose=KEY_PURPOSE, associated_data=str(job.id).encode())
    chunks = _plaintext(job, data_key)
    first = next(chunks)
    _render, content_type, extension = documents.RENDERERS[job.format]
    label = "draft" if job.draft else "final"
    filename = f"{job.type.lower().replace('_', '-')}-{job.merchant_id}-{job.period.replace('..', '_')}-{label}.{extension}"
    return Document(filename=filename, content_type=content_type, content_length=job.content_length, chunks=_resumed(first, chunks))


def _plaintext(job: LedgerJob, data_key: bytes) -> Generator[bytes]:
    stream = storage.open_stream(job.object_key)
    try:
        yield from documents.decrypt_chunks(stream.read, key=data_key, associated_data=_associated_data(job.id, job.object_key))
    except (InvalidTag, ValueError):
        log.error("decrypt failed", purpose="ledger-document", ledgerId=str(job.id))
        raise ApiError("The stored document does not open.", code="DECRYPT_FAILED", status_code=500) from None
    finally:
        stream.close()


def _resumed(first: bytes, rest: Generator[bytes]) -> Generator[bytes]:
    try:
        yield first
        yield from rest
    finally:
        rest.close()


def _reject_stalled(job: LedgerJob, *, timeout_ms: int) -> None:
    job.status, job.run_id, job.failed_at = Status.REJECTED, None, timezone.now()
    job.error_code = JOB_EXECUTION_FAILED
    job.error_message = (
        f"The job stalled on each of its {job.runs_since_request} attempts (no sign of life for {timeout_ms} ms); retry the job."
    )
    job.save(using=DB, update_fields=["status", "run_id", "failed_at", "error_code", "error_message", "updated_at"])
    log.warning("ledger.job_stalled_too_often", ledgerId=str(job.id), attempts=job.runs_since_request, errorCode=JOB_EXECUTION_FAILED)
    _notify(job)


def job_sweep(*, timeout_ms: int | None = None) -> int:
    """Take back every PROCESSING job whose run has not beaten its heartbeat for
    APP_ENV_JOB_TIMEOUT_MS: back to PENDING and published again, or REJECTED (JOB_EXECUTION_FAILED)
    once it has run LEDGER_MAX_ATTEMPTS times since it was asked for. Publish again every job PENDING
    for that long (its message was lost, e.g. by a broker that keeps topics in memory). Logs how
    many were stalled; returns the stalled count. Rows are locked with SKIP LOCKED, so two sweeps
    never take the same job, and the stalled run can no longer write to it (its run id is cleared:
    its next heartbeat stops it, and its result is refused)."""
    timeout_ms = settings.APP_ENV_JOB_TIMEOUT_MS if timeout_ms is None else timeout_ms
    cutoff = timezone.now() - datetime.timedelta(milliseconds=timeout_ms)
    jobs = LedgerJob.objects.using(DB).select_for_update(skip_locked=True).order_by("pk")
    rejected = 0
    with transaction.atomic(using=DB):
        # A run started before heartbeats existed has none: its start is its last sign of life.
        stalled = list(
            jobs.filter(status=Status.PROCESSING).alias(alive_at=Coalesce("heartbeat_at", "started_at")).filter(alive_at__lt=cutoff)
        )
        for job in stalled:
            if job.runs_since_request >= settings.LEDGER_MAX_ATTEMPTS:
                _reject_stalled(job, timeout_ms=timeout_ms)
                rejected += 1
            else:
                _requeue(job, asked=False)
        waiting = list(jobs.filter(status=Status.PENDING, queued_at__lt=cutoff))
        for job in waiting:
            job.queued_at = timezone.now()
            job.save(using=DB, update_fields=["queued_at", "updated_at"])
            _enqueue(job)
    log.info("ledger.sweep", stalled=len(stalled), rejected=rejected, republished=len(waiting), timeoutMs=timeout_ms)
    return len(stalled)
