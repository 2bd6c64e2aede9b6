"""Django admin for ledger jobs: read-only; retry and regenerate are actions calling the services,
so the admin enqueues, notifies and refuses (JOB_IN_PROGRESS) exactly like the API. The sealed data
key and the object key are not shown."""

from django.contrib import admin

from apps.ledger import services
from apps.ledger.models import LedgerJob
from merchant_platform.admin import MerchantAdmin, MerchantFilter


@admin.register(LedgerJob)
class LedgerJobAdmin(MerchantAdmin):
    list_display = ("id", "merchant", "type", "format", "period", "status", "draft", "attempt_count", "created_at")
    list_filter = ("status", "type", "format", "draft", MerchantFilter)
    search_fields = ("=merchant_id", "=id")
    date_hierarchy = "created_at"
    fields = (
        "id",
        "merchant",
        "type",
        "format",
        "period",
        "date_from",
        "date_to",
        "account_id",
        "status",
        "draft",
        "attempt_count",
        "runs_since_request",
        "error_code",
        "error_message",
        "queued_at",
        "started_at",
        "heartbeat_at",
        "completed_at",
        "failed_at",
        "content_length",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("retry", "regenerate")

    @admin.action(description="Retry the selected failed jobs", permissions=("service",))
    def retry(self, request, queryset):
        self.call_each(request, queryset, services.job_retry, "ledger_id")

    @admin.action(description="Regenerate the selected draft documents", permissions=("service",))
    def regenerate(self, request, queryset):
        self.call_each(request, queryset, services.job_regenerate, "ledger_id")

    def has_delete_permission(self, request, obj=None):
        return False  # jobs are a record of what was generated; nothing deletes them
