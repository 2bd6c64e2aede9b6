"""Django admin for operators of the all-in-one topology. Records are read-only here: changes go
through the services (actions and deletes below), so the admin follows the same rules as the API.
An integration's credential is never shown, not even as ciphertext: only its mask."""

from django.contrib import admin

from apps.commerce import selectors, services
from apps.commerce.models import (
    Merchant,
    Product,
    ProductVariant,
    SaleOrder,
    SaleOrderLine,
    SaleReturn,
    SaleReturnLine,
    UnmatchedRefund,
    UnmatchedSettlement,
)
from apps.commerce.sales import services as sales
from merchant_platform.admin import ReadOnlyInline, ServiceBackedAdmin, money_column, service_action
from merchant_platform.models import Configuration


@admin.register(Merchant)
class MerchantAdmin(ServiceBackedAdmin):
    list_display = ("id", "name", "slug", "country", "default_currency", "status", "created_at")
    list_filter = ("status", "country")
    search_fields = ("name", "slug", "legal_name")
    fields = (
        "id",
        "name",
        "slug",
        "legal_name",
        "default_currency",
        "country",
        "timezone",
        "status",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("suspend", "reactivate")
    delete_service = (services.merchant_delete, "merchant_id")

    def _set_status(self, request, queryset, status):
        self.call_each(request, queryset.exclude(status=status), services.merchant_update, "merchant_id", status=status)

    @admin.action(description="Suspend selected merchants", permissions=("service",))
    def suspend(self, request, queryset):
        self._set_status(request, queryset, Merchant.Status.SUSPENDED)

    @admin.action(description="Reactivate selected merchants", permissions=("service",))
    def reactivate(self, request, queryset):
        self._set_status(request, queryset, Merchant.Status.ACTIVE)


@admin.register(Product)
class ProductAdmin(ServiceBackedAdmin):
    list_display = ("id", "name", "merchant", "status", "tax_group_id", "created_at")
    list_filter = ("status",)
    list_select_related = ("merchant",)
    search_fields = ("name",)
    fields = ("id", "merchant", "name", "description", "status", "tax_group_id", "created_by", "created_at", "updated_at")
    readonly_fields = fields
    delete_service = (services.product_delete, "product_id")


@admin.register(ProductVariant)
class ProductVariantAdmin(ServiceBackedAdmin):
    list_display = ("id", "sku", "merchant", "primary_product_id", "price_shown", "status")
    list_filter = ("status", "currency")
    list_select_related = ("merchant",)
    search_fields = ("sku", "name")
    fields = (
        "id",
        "merchant",
        "primary_product",
        "sku",
        "name",
        "price_shown",
        "unit_cost_shown",
        "attributes",
        "status",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    delete_service = (services.variant_delete, "variant_id")
    price_shown = money_column("price_amount", description="price")
    unit_cost_shown = money_column("unit_cost_amount", description="unit cost")


@admin.register(Configuration)
class IntegrationAdmin(ServiceBackedAdmin):
    """Provider integrations (Configuration rows of group INTEGRATION): the credential appears only
    masked; replacing it is an API call, never a plaintext form field here."""

    list_display = ("id", "code", "principal_id", "environment", "status", "credential_mask", "created_at")
    list_filter = ("environment", "status")
    search_fields = ("code", "name")
    fields = (
        "id",
        "group",
        "code",
        "name",
        "principal_type",
        "principal_id",
        "environment",
        "status",
        "settings",
        "credential_mask",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("deactivate",)
    delete_service = (services.integration_delete, "integration_id")

    def get_queryset(self, request):
        return selectors.integrations()

    @admin.action(description="Deactivate selected integrations", permissions=("service",))
    def deactivate(self, request, queryset):
        active = queryset.exclude(status=Configuration.Status.INACTIVE)
        self.call_each(request, active, services.integration_update, "integration_id", status=Configuration.Status.INACTIVE)


class KeptRecordAdmin(ServiceBackedAdmin):
    """Never deleted here: orders, returns and what payment reported are the trail of the money."""

    def has_delete_permission(self, request, obj=None):
        return False


class AmountColumns:
    """An order's or a return's net, tax and gross, in its currency."""

    net_shown = money_column("net_amount", description="net")
    tax_shown = money_column("tax_amount", description="tax")
    gross_shown = money_column("gross_amount", description="gross")


class SaleOrderLineInline(ReadOnlyInline):
    model = SaleOrderLine
    fields = ("line_number", "sku", "name", "variant_id", "quantity", "unit_price_shown", "net_shown", "tax_shown", "gross_shown")
    readonly_fields = fields
    unit_price_shown = money_column("unit_price_amount", currency="order.currency", description="unit price")
    net_shown = money_column("net_amount", currency="order.currency", description="net")
    tax_shown = money_column("tax_amount", currency="order.currency", description="tax")
    gross_shown = money_column("gross_amount", currency="order.currency", description="gross")


class SaleReturnInline(ReadOnlyInline):
    model = SaleReturn
    fields = ("id", "status", "gross_shown", "tax_shown", "reason", "payment_refund_id", "failure_reason", "created_at", "succeeded_at")
    readonly_fields = fields
    gross_shown = money_column("gross_amount", description="gross refunded")
    tax_shown = money_column("tax_amount", description="tax refunded")


@admin.register(SaleOrder)
class SaleOrderAdmin(AmountColumns, KeptRecordAdmin):
    """Sale orders, read-only; the actions place, cancel, fulfil, expire and refund through the same
    service functions as the API (the saga, payment and inventory calls included). No delete."""

    list_display = ("id", "merchant", "status", "gross_shown", "placed_at", "paid_at", "created_at")
    list_filter = ("status", "currency")
    list_select_related = ("merchant",)
    search_fields = ("customer_name", "customer_email", "placement_reference")
    fields = (
        "id",
        "merchant",
        "status",
        "currency",
        "customer_name",
        "customer_email",
        "customer_phone",
        "note",
        "finance_account_id",
        "payment_channel",
        "net_shown",
        "tax_shown",
        "gross_shown",
        "placement_reference",
        "payment_transaction_id",
        "closing_reason",
        "placed_at",
        "expires_at",
        "paid_at",
        "fulfilled_at",
        "cancelled_at",
        "expired_at",
        "refunded_shown",
        "refunded_at",
        "reservation_released_at",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    inlines = (SaleOrderLineInline, SaleReturnInline)
    actions = (
        service_action("place", "Place selected draft orders", sales.order_place, "order_id"),
        service_action("cancel", "Cancel selected orders", sales.order_cancel, "order_id"),
        service_action("fulfill", "Mark selected paid orders fulfilled", sales.order_fulfill, "order_id"),
        service_action(
            "expire_if_unpaid", "Expire selected placed orders whose payment ended unpaid", sales.order_expire_if_unpaid, "order_id"
        ),
        "refund",
    )
    refunded_shown = money_column("refunded_amount", description="refunded")

    @admin.action(description="Refund selected paid orders in full (goods back on hand)", permissions=("service",))
    def refund(self, request, queryset):
        """Everything still refundable of each order, restocked where the sale took it from."""
        self.call_each(request, queryset, sales.order_refund, "order_id", reason=f"Refunded in the admin by {request.user.get_username()}")


class SaleReturnLineInline(ReadOnlyInline):
    model = SaleReturnLine
    fields = ("order_line", "quantity", "restock", "location_id", "net_shown", "tax_shown", "gross_shown")
    readonly_fields = fields
    net_shown = money_column("net_amount", currency="sale_return.currency", description="net")
    tax_shown = money_column("tax_amount", currency="sale_return.currency", description="tax")
    gross_shown = money_column("gross_amount", currency="sale_return.currency", description="gross")


@admin.register(SaleReturn)
class SaleReturnAdmin(AmountColumns, KeptRecordAdmin):
    """Returns of sale orders and their refunds at payment, read-only (the refund action of the
    orders makes them). No delete: they are the trail of money given back."""

    list_display = ("id", "order_id", "merchant", "status", "gross_shown", "payment_refund_id", "created_at", "succeeded_at", "failed_at")
    list_filter = ("status", "currency")
    list_select_related = ("merchant",)
    search_fields = ("=id", "=order__id", "=payment_refund_id")
    fields = (
        "id",
        "order",
        "merchant",
        "status",
        "reason",
        "currency",
        "net_shown",
        "tax_shown",
        "gross_shown",
        "payment_refund_id",
        "failure_reason",
        "created_by",
        "created_at",
        "submitted_at",
        "succeeded_at",
        "failed_at",
    )
    readonly_fields = fields
    inlines = (SaleReturnLineInline,)


@admin.register(UnmatchedSettlement)
class UnmatchedSettlementAdmin(KeptRecordAdmin):
    """Settlements payment reported that paid no order (the reason says why): money to reconcile
    by hand (a refund, or a match). Read-only; no delete, so the trail stays."""

    list_display = ("received_at", "merchant_id", "reason", "transaction_id", "source_id", "amount", "currency", "order_id")
    list_filter = ("reason",)
    search_fields = ("message_id", "transaction_id", "source_id")
    fields = (
        "message_id",
        "merchant_id",
        "reason",
        "transaction_id",
        "source_id",
        "amount",
        "currency",
        "order_id",
        "payload",
        "received_at",
    )
    readonly_fields = fields


@admin.register(UnmatchedRefund)
class UnmatchedRefundAdmin(KeptRecordAdmin):
    """Refund outcomes payment reported that ended no return (the reason says why): to reconcile by
    hand. Read-only; no delete, so the trail stays."""

    list_display = ("received_at", "merchant_id", "event_type", "reason", "refund_id", "transaction_id", "amount", "currency", "order_id")
    list_filter = ("reason", "event_type")
    search_fields = ("message_id", "refund_id", "transaction_id", "source_id")
    fields = (
        "message_id",
        "merchant_id",
        "event_type",
        "reason",
        "refund_id",
        "transaction_id",
        "source_id",
        "amount",
        "currency",
        "order_id",
        "return_id",
        "payload",
        "received_at",
    )
    readonly_fields = fields
