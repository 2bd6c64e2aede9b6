"""lastValidatedAt, written without making validate's caller wait (spec 3.2).

validate hands the license id to a per-process recorder and answers at once. A daemon thread writes
the collected timestamps every LICENSING_LAST_VALIDATED_FLUSH_SECONDS in one UPDATE (a burst of
validations of one license costs one write), then re-publishes the certificates of those licenses
that are missing or past half their lifetime. A failure is logged and the batch dropped: the value
is informational and the next validation writes it again (a process that exits loses at most the
last interval's timestamps, for the same reason).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime

from django.conf import settings
from django.db import connections
from django.db.models import Case, DateTimeField, Q, Value, When

from apps.licensing.certificates import refresh_stale_certificates
from apps.licensing.models import License
from merchant_platform.logging import get_logger

DB = "licensing"
UPDATE_CHUNK = 500
log = get_logger(__name__)


class LastValidatedRecorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, datetime] = {}
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def record(self, license_id: int, at: datetime) -> None:
        with self._lock:
            previous = self._pending.get(license_id)
            if previous is None or at > previous:
                self._pending[license_id] = at
            if self._pid != os.getpid():  # first use in this process, or the first after a fork
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="licensing-last-validated", daemon=True)
                self._thread.start()

    def _take_batch(self) -> dict[int, datetime]:
        with self._lock:
            batch, self._pending = self._pending, {}
        return batch

    def _run(self) -> None:
        while True:
            time.sleep(settings.LICENSING_LAST_VALIDATED_FLUSH_SECONDS)
            try:
                self.flush()
            finally:
                # The thread's connection goes back to the pool (or is closed) between batches.
                connections.close_all()

    def flush(self) -> None:
        """Write what is pending now."""
        batch = self._take_batch()
        if not batch:
            return
        try:
            write_last_validated(batch)
        except Exception:  # the caller already has its answer; the value is rewritten next time
            log.exception("licensing.last_validated_failed", licenses=len(batch))
        try:
            refresh_stale_certificates(list(batch))
        except Exception:  # consumers read null until the next refresh; never the caller's problem
            log.exception("licensing.certificate_refresh_failed", licenses=len(batch))


def write_last_validated(batch: dict[int, datetime]) -> int:
    """One UPDATE per chunk of the batch; a later value already written is never moved back."""
    written = 0
    items = list(batch.items())
    for start in range(0, len(items), UPDATE_CHUNK):
        chunk = dict(items[start : start + UPDATE_CHUNK])
        newest = Case(*(When(pk=license_id, then=Value(at)) for license_id, at in chunk.items()), output_field=DateTimeField())
        written += (
            License.all_objects.using(DB)
            .filter(pk__in=list(chunk))
            .filter(Q(last_validated_at__isnull=True) | Q(last_validated_at__lt=newest))
            .update(last_validated_at=newest)
        )
    return written


recorder = LastValidatedRecorder()
