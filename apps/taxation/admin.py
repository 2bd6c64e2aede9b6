"""Django admin for operators of the all-in-one topology. Records are read-only here: a tax group
shows its items inline, a tax set its status history; changes are admin actions and deletes that
call the service functions, so the admin follows the same rules as the API."""

from __future__ import annotations

from django.contrib import admin

from apps.taxation import services
from apps.taxation.models import RoundingPolicy, TaxGroup, TaxItem, TaxSet
from merchant_platform.admin import MerchantAdmin, MerchantFilter, ReadOnlyInline


class TaxItemInline(ReadOnlyInline):
    model = TaxItem
    fields = ("position", "name", "rate", "inclusive", "compound", "valid_from", "valid_to")
    readonly_fields = fields


@admin.register(TaxGroup)
class TaxGroupAdmin(MerchantAdmin):
    list_display = ("id", "name", "merchant", "created_at")
    list_filter = (MerchantFilter,)
    search_fields = ("=id", "=merchant_id", "name")
    fields = ("id", "merchant", "name", "description", "created_by", "created_at", "updated_at")
    readonly_fields = fields
    inlines = (TaxItemInline,)
    delete_service = (services.tax_group_delete, "tax_group_id")


@admin.register(TaxSet)
class TaxSetAdmin(MerchantAdmin):
    list_display = ("id", "product_id", "group", "merchant", "status", "source", "created_at", "deactivated_at")
    list_filter = ("status", "source", MerchantFilter)
    search_fields = ("=id", "=product_id", "=merchant_id")
    fields = ("id", "merchant", "product_id", "group", "status", "source", "created_at", "deactivated_at", "updated_at")
    readonly_fields = fields
    actions = ("deprovision",)

    @admin.action(description="Deprovision the products of the selected active tax sets", permissions=("service",))
    def deprovision(self, request, queryset):
        for product_id in queryset.filter(status=TaxSet.Status.ACTIVE).values_list("product_id", flat=True):
            services.tax_set_deprovision(product_id=product_id, source=services.ADMIN)

    def has_delete_permission(self, request, obj=None):
        return False  # the status history stays; deprovisioning ends a binding


@admin.register(RoundingPolicy)
class RoundingPolicyAdmin(MerchantAdmin):
    list_display = ("merchant", "mode", "updated_at")
    list_filter = ("mode", MerchantFilter)
    search_fields = ("=merchant_id",)
    fields = ("id", "merchant", "mode", "created_at", "updated_at")
    readonly_fields = fields
    actions = ("round_per_line", "round_per_document")
    delete_service = (services.rounding_policy_delete, "rounding_policy_id")

    def _set(self, queryset, mode: str) -> None:
        for merchant_id in queryset.values_list("merchant_id", flat=True):
            services.rounding_policy_set(merchant_id=merchant_id, mode=mode)

    @admin.action(description="Round per line", permissions=("service",))
    def round_per_line(self, request, queryset):
        self._set(queryset, RoundingPolicy.Mode.LINE)

    @admin.action(description="Round per document", permissions=("service",))
    def round_per_document(self, request, queryset):
        self._set(queryset, RoundingPolicy.Mode.DOCUMENT)
