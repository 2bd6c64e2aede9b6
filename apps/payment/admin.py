"""Django admin for operators of the all-in-one topology. Transactions, attempts, refunds and
deliveries are read-only: changes are actions that call the services (cancel, redeliver, ask the
provider), so the admin emits the same events as the API. A webhook's signing secret is never shown, not even sealed."""

from django.contrib import admin

from apps.payment import services
from apps.payment.models import PaymentAttempt, PaymentTransaction, Refund, WebhookConfig, WebhookDelivery
from merchant_platform.admin import MerchantAdmin, MerchantFilter, ReadOnlyInline, money_column


class PaymentAdmin(MerchantAdmin):
    def has_delete_permission(self, request, obj=None):
        return False  # money records are never deleted, not even softly, from here

    def _each(self, request, queryset, function, keyword: str) -> None:
        self.message_user(request, f"{self.call_each(request, queryset, function, keyword)} done.")


transaction_amount = money_column("amount", currency="transaction.currency")


class AttemptInline(ReadOnlyInline):
    model = PaymentAttempt
    fields = ("id", "channel", "code", "amount_shown", "status", "provider_reference", "expires_at", "paid_at")
    readonly_fields = fields
    amount_shown = transaction_amount


@admin.register(PaymentTransaction)
class TransactionAdmin(PaymentAdmin):
    list_display = ("id", "merchant", "source_id", "amount_shown", "paid_amount_shown", "refunded_amount_shown", "status", "created_at")
    list_filter = ("status", "currency", MerchantFilter)
    search_fields = ("source_id",)
    fields = (
        "id",
        "merchant",
        "source_id",
        "amount_shown",
        "paid_amount_shown",
        "refunded_amount_shown",
        "tax_amount_shown",
        "finance_account_id",
        "lines",
        "description",
        "status",
        "settled_at",
        "cancelled_at",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    inlines = (AttemptInline,)
    actions = ("cancel",)
    amount_shown = money_column("amount")
    paid_amount_shown = money_column("paid_amount")
    refunded_amount_shown = money_column("refunded_amount")
    tax_amount_shown = money_column("tax_amount")

    @admin.action(description="Cancel selected NEW transactions (and their open attempts)", permissions=("service",))
    def cancel(self, request, queryset):
        self._each(request, queryset.filter(status=PaymentTransaction.Status.NEW), services.transaction_cancel, "transaction_id")


@admin.register(PaymentAttempt)
class AttemptAdmin(PaymentAdmin):
    list_display = ("id", "transaction_id", "merchant", "channel", "code", "amount_shown", "status", "created_at")
    list_filter = ("status", "channel", MerchantFilter)
    search_fields = ("code", "provider_reference")
    list_select_related = ("transaction",)
    fields = (
        "id",
        "transaction",
        "merchant",
        "channel",
        "code",
        "amount_shown",
        "status",
        "provider_reference",
        "qr_payload",
        "bank_code",
        "failure_reason",
        "expires_at",
        "sent_at",
        "paid_at",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("cancel", "resolve")
    amount_shown = transaction_amount

    @admin.action(description="Cancel selected open attempts", permissions=("service",))
    def cancel(self, request, queryset):
        self._each(request, queryset, services.attempt_cancel, "attempt_id")

    @admin.action(description="Ask the provider about selected UNKNOWN attempts", permissions=("service",))
    def resolve(self, request, queryset):
        self._each(request, queryset.filter(status=PaymentAttempt.Status.UNKNOWN), services.attempt_resolve, "attempt_id")


@admin.register(Refund)
class RefundAdmin(PaymentAdmin):
    list_display = ("id", "transaction_id", "merchant", "channel", "amount_shown", "tax_amount_shown", "status", "created_at")
    list_filter = ("status", "channel", MerchantFilter)
    search_fields = ("code", "provider_reference")
    fields = (
        "id",
        "transaction",
        "attempt",
        "merchant",
        "channel",
        "code",
        "amount_shown",
        "tax_amount_shown",
        "reason",
        "status",
        "provider_reference",
        "failure_reason",
        "requested_by",
        "lines",
        "sent_at",
        "succeeded_at",
        "failed_at",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("resolve",)
    amount_shown = money_column("amount")
    tax_amount_shown = money_column("tax_amount")

    @admin.action(description="Ask the provider about selected PENDING refunds", permissions=("service",))
    def resolve(self, request, queryset):
        self._each(request, queryset.filter(status=Refund.Status.PENDING), services.refund_resolve, "refund_id")


@admin.register(WebhookConfig)
class WebhookConfigAdmin(MerchantAdmin):
    list_display = ("id", "merchant", "name", "url", "status", "created_at")
    list_filter = ("status", MerchantFilter)
    search_fields = ("name", "url")
    fields = (
        "id",
        "merchant",
        "name",
        "url",
        "event_types",
        "status",
        "signing_method",
        "metadata",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("deactivate",)
    delete_service = (services.webhook_delete, "webhook_id")

    @admin.action(description="Deactivate selected webhooks", permissions=("service",))
    def deactivate(self, request, queryset):
        active = queryset.filter(status=WebhookConfig.Status.ACTIVE)
        self.call_each(request, active, services.webhook_update, "webhook_id", status=WebhookConfig.Status.INACTIVE)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(PaymentAdmin):
    list_display = (
        "id",
        "webhook_id",
        "merchant",
        "event_type",
        "status",
        "attempt_count",
        "last_status_code",
        "next_attempt_at",
        "created_at",
    )
    list_filter = ("status", "event_type", MerchantFilter)
    search_fields = ("message_id",)
    fields = (
        "id",
        "webhook",
        "merchant",
        "message_id",
        "event_type",
        "status",
        "attempt_count",
        "next_attempt_at",
        "last_status_code",
        "last_error",
        "log",
        "payload",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("redeliver",)

    @admin.action(description="Send selected deliveries again (same webhook-id)", permissions=("service",))
    def redeliver(self, request, queryset):
        self._each(request, queryset.exclude(status=WebhookDelivery.Status.PENDING), services.webhook_redeliver, "delivery_id")
