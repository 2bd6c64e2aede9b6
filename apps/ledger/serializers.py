"""JSON of the ledger service (camelCase; ids as strings)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.ledger.models import LedgerJob
from merchant_platform.serializers import BaseSerializer, SnowflakeField, StrictCharField


class FailureReasonSerializer(BaseSerializer):
    errorCode = serializers.CharField(read_only=True)
    message = serializers.CharField(source="error_message", read_only=True)


class LedgerJobSerializer(BaseSerializer):
    ledgerId = SnowflakeField(source="id", read_only=True)
    merchantId = SnowflakeField(read_only=True)
    type = serializers.ChoiceField(choices=LedgerJob.Type.choices, read_only=True)
    format = serializers.ChoiceField(choices=LedgerJob.Format.choices, read_only=True)
    period = serializers.CharField(read_only=True)
    dateFrom = serializers.DateField(read_only=True)
    dateTo = serializers.DateField(read_only=True)
    accountId = SnowflakeField(read_only=True, allow_null=True)
    status = serializers.ChoiceField(choices=LedgerJob.Status.choices, read_only=True)
    draft = serializers.BooleanField(read_only=True, help_text="The document was rendered while its period was still open (DRAFT).")
    attemptCount = serializers.IntegerField(read_only=True)
    failureReason = serializers.SerializerMethodField()
    contentLength = serializers.IntegerField(read_only=True, allow_null=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    queuedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    startedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    heartbeatAt = serializers.DateTimeField(read_only=True, allow_null=True, help_text="The current run's last sign of life.")
    completedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    failedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    @extend_schema_field(FailureReasonSerializer(allow_null=True))
    def get_failureReason(self, job: LedgerJob) -> dict | None:
        return FailureReasonSerializer(job).data if job.error_code else None


class LedgerJobCreateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.job_create."""

    merchantId = SnowflakeField()
    type = serializers.ChoiceField(choices=LedgerJob.Type.choices)
    format = serializers.ChoiceField(choices=LedgerJob.Format.choices)
    period = StrictCharField(
        max_length=32,
        help_text="YYYY-MM (a month), YYYY-Qn (a quarter) or YYYY-MM-DD..YYYY-MM-DD (a custom range, at most "
        "LEDGER_MAX_PERIOD_DAYS days); a period that has not started is refused.",
    )
    accountId = SnowflakeField(required=False, allow_null=True, help_text="Required for ACCOUNT_STATEMENT only.")
