"""Records of the ledger service: generation jobs (spec 2.1 LedgerJob) and the outbox of its
Kafka events (ledger.generate)."""

from __future__ import annotations

from django.db import models

from merchant_platform.messaging import OutboxMessageBase
from merchant_platform.models import OwnedModel


class LedgerJob(OwnedModel):
    """One document to generate. States (docs/services/ledger.md): PENDING -> PROCESSING ->
    COMPLETED or REJECTED; retry (REJECTED) and regenerate (a COMPLETED draft) go back to PENDING,
    and the recovery sweep returns a PROCESSING job whose heartbeat is stale to PENDING (REJECTED
    after LEDGER_MAX_ATTEMPTS runs)."""

    class Type(models.TextChoices):
        GENERAL_LEDGER = "GENERAL_LEDGER"
        TRIAL_BALANCE = "TRIAL_BALANCE"
        ACCOUNT_STATEMENT = "ACCOUNT_STATEMENT"

    class Format(models.TextChoices):
        PDF = "PDF"
        CSV = "CSV"
        XLSX = "XLSX"

    class Status(models.TextChoices):
        PENDING = "PENDING"
        PROCESSING = "PROCESSING"
        COMPLETED = "COMPLETED"
        REJECTED = "REJECTED"

    merchant_id = models.BigIntegerField(db_index=True)
    type = models.CharField(max_length=24, choices=Type.choices)
    format = models.CharField(max_length=8, choices=Format.choices)
    period = models.CharField(max_length=32, help_text="As asked: YYYY-MM, YYYY-Qn or YYYY-MM-DD..YYYY-MM-DD.")
    date_from = models.DateField()
    date_to = models.DateField()
    account_id = models.BigIntegerField(null=True, blank=True, help_text="The finance account of an ACCOUNT_STATEMENT.")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    draft = models.BooleanField(default=False, help_text="The last document was rendered while its period was still open.")
    attempt_count = models.PositiveIntegerField(default=0, help_text="Runs over the job's lifetime.")
    run_id = models.UUIDField(null=True, blank=True, help_text="The current run; only it may complete or fail the job.")
    runs_since_request = models.PositiveIntegerField(
        default=0, help_text="Runs since the job was last asked for (create, retry, regenerate); capped by LEDGER_MAX_ATTEMPTS."
    )
    error_code = models.CharField(max_length=32, blank=True, default="")
    error_message = models.CharField(max_length=500, blank=True, default="")
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of the current run.")
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    object_key = models.CharField(max_length=255, blank=True, default="")
    wrapped_key = models.TextField(blank=True, default="", help_text="The document's data key, sealed under the application secret.")
    content_length = models.BigIntegerField(null=True, blank=True)

    class Meta(OwnedModel.Meta):
        ordering = ("-created_at", "-id")
        indexes = [
            models.Index(fields=["merchant_id", "created_at"], name="ledger_job_merchant_created"),
            models.Index(fields=["status", "started_at"], name="ledger_job_status_started"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.period} {self.format} ({self.status})"


class OutboxMessage(OutboxMessageBase):
    """Ledger's outbox (the kernel's shape, in ledger's schema): `ledger.generate` messages."""
