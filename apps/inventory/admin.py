"""Django admin for operators of the all-in-one topology. Quantities and tracking are read-only
here: every change is an admin action or a delete that calls the service functions, so the admin
locks, tracks and publishes exactly as the API does. Tracking rows cannot even be deleted: the
database refuses it."""

from __future__ import annotations

from django.contrib import admin

from apps.inventory import selectors, services
from apps.inventory.models import Item, Location, PurchaseOrder, PurchaseOrderLine, Stock, Ticket, Tracking
from merchant_platform.admin import MerchantAdmin, MerchantFilter, ReadOnlyInline, money_column, service_action

# Item and Tracking hold a unit cost in its own currency (what the stock was bought in).
unit_cost = money_column("unit_cost_amount", currency="cost_currency", description="unit cost")


@admin.register(Location)
class LocationAdmin(MerchantAdmin):
    list_display = ("id", "merchant", "name", "code", "is_default", "created_at")
    list_filter = ("is_default", MerchantFilter)
    search_fields = ("=id", "=merchant_id", "name", "code")
    fields = ("id", "merchant", "name", "code", "is_default", "created_by", "created_at", "updated_at")
    readonly_fields = fields
    delete_service = (services.location_delete, "location_id")


def _allow_oversell(modeladmin, request, queryset, value: bool):
    for item_id in queryset.values_list("id", flat=True):
        services.item_update(item_id=item_id, allow_oversell=value)


@admin.register(Item)
class ItemAdmin(MerchantAdmin):
    list_display = ("id", "merchant", "sku", "name", "status", "allow_oversell", "unit_cost_shown", "currency")
    list_filter = ("status", "allow_oversell", MerchantFilter)
    search_fields = ("=id", "=merchant_id", "=variant_id", "sku", "name")
    fields = (
        "id",
        "merchant",
        "variant_id",
        "product_id",
        "sku",
        "name",
        "status",
        "allow_oversell",
        "currency",
        "unit_cost_shown",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("allow_oversell", "block_oversell")
    unit_cost_shown = unit_cost

    def has_delete_permission(self, request, obj=None):
        return False  # items follow commerce's variants

    @admin.action(description="Allow overselling", permissions=("service",))
    def allow_oversell(self, request, queryset):
        _allow_oversell(self, request, queryset, True)

    @admin.action(description="Block overselling", permissions=("service",))
    def block_oversell(self, request, queryset):
        _allow_oversell(self, request, queryset, False)


@admin.register(Stock)
class StockAdmin(MerchantAdmin):
    list_display = ("id", "merchant", "item", "location", "quantity_on_hand", "reserved", "available", "updated_at")
    list_filter = (MerchantFilter,)
    search_fields = ("=id", "=merchant_id", "=item__id", "item__sku")
    list_select_related = ("item", "location")
    fields = ("id", "merchant", "item", "location", "quantity_on_hand", "reserved", "available", "created_at", "updated_at")
    readonly_fields = fields

    def get_queryset(self, request):
        return selectors.stocks().select_related("item", "location")

    @admin.display(description="available")
    def available(self, obj):
        return obj.available

    def has_delete_permission(self, request, obj=None):
        return False  # stock changes go through adjustments and counts


@admin.register(Tracking)
class TrackingAdmin(MerchantAdmin):
    list_display = (
        "id",
        "merchant",
        "item_id",
        "location_id",
        "operation",
        "delta",
        "quantity_after",
        "reference_type",
        "reference_id",
        "note",
    )
    list_filter = ("operation", "reference_type", "note", MerchantFilter)
    search_fields = ("=id", "=merchant_id", "=item_id", "reference_id")
    date_hierarchy = "created_at"
    fields = (
        "id",
        "merchant",
        "item_id",
        "location_id",
        "stock_id",
        "operation",
        "delta",
        "reserved_delta",
        "requested",
        "quantity_after",
        "reserved_after",
        "reference_type",
        "reference_id",
        "reference_line",
        "note",
        "reason",
        "unit_cost_shown",
        "returned_from_id",
        "created_by",
        "created_at",
    )
    readonly_fields = fields
    unit_cost_shown = unit_cost

    def has_delete_permission(self, request, obj=None):
        return False  # immutable, in the database too


@admin.register(Ticket)
class TicketAdmin(MerchantAdmin):
    list_display = ("id", "merchant", "type", "status", "item_id", "location_id", "counted_quantity", "difference", "created_at")
    list_filter = ("status", "type", MerchantFilter)
    search_fields = ("=id", "=merchant_id", "=item__id")
    fields = (
        "id",
        "merchant",
        "type",
        "status",
        "item",
        "location",
        "counted_quantity",
        "expected_quantity",
        "difference",
        "note",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = (
        service_action("apply_counts", "Apply the counts", services.ticket_apply, "ticket_id"),
        service_action("cancel_tickets", "Cancel", services.ticket_cancel, "ticket_id"),
    )

    def has_delete_permission(self, request, obj=None):
        return False  # cancel instead: history stays


class PurchaseOrderLineInline(ReadOnlyInline):
    model = PurchaseOrderLine
    fields = ("item", "quantity_ordered", "quantity_received", "unit_cost_shown")
    readonly_fields = fields
    unit_cost_shown = money_column("unit_cost_amount", currency="purchase_order.currency", description="unit cost")


@admin.register(PurchaseOrder)
class PurchaseOrderAdmin(MerchantAdmin):
    list_display = ("id", "merchant", "supplier", "status", "currency", "ordered_at", "received_at", "created_at")
    list_filter = ("status", MerchantFilter)
    search_fields = ("=id", "=merchant_id", "supplier")
    fields = ("id", "merchant", "supplier", "location", "currency", "status", "ordered_at", "received_at", "created_by", "created_at")
    readonly_fields = fields
    inlines = (PurchaseOrderLineInline,)
    actions = (
        service_action("place_orders", "Mark as ordered", services.purchase_order_place, "purchase_order_id"),
        service_action("cancel_orders", "Cancel", services.purchase_order_cancel, "purchase_order_id"),
    )

    def has_delete_permission(self, request, obj=None):
        return False  # cancel instead
