"""Django admin for operators of the all-in-one topology. The books are read-only here: nothing is
added, edited or deleted through a form; a voucher is voided by the admin action below, which calls
the same service function as the API (services.voucher_void), so the admin cannot unbalance the
books. Corrections of COGS and INVENTORY_ADJUSTMENT vouchers are ADJUSTMENT vouchers posted through
the API."""

from django.contrib import admin, messages

from apps.finance import services
from apps.finance.models import Account, FinanceTransaction, Voucher
from merchant_platform.admin import ServiceBackedAdmin
from merchant_platform.errors import ApiError


class BooksAdmin(ServiceBackedAdmin):
    def has_delete_permission(self, request, obj=None):
        return False  # books are append-only: no record of them is ever deleted


@admin.register(Account)
class AccountAdmin(BooksAdmin):
    list_display = ("id", "merchant_id", "code", "name", "type", "currency", "balance", "posting_sequence", "system_role")
    list_filter = ("type", "currency", "system_role")
    search_fields = ("code", "name")
    fields = (
        "id",
        "merchant_id",
        "code",
        "name",
        "type",
        "currency",
        "normal_side",
        "system_role",
        "balance",
        "posting_sequence",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields


class LineInline(admin.TabularInline):
    model = FinanceTransaction
    fields = ("line_number", "account", "currency", "debit", "credit", "posting_sequence", "balance_after")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Voucher)
class VoucherAdmin(BooksAdmin):
    list_display = ("id", "merchant_id", "voucher_number", "kind", "reason", "status", "date", "memo")
    list_filter = ("kind", "status", "fiscal_year")
    search_fields = ("voucher_number", "memo", "source_id")
    fields = (
        "id",
        "merchant_id",
        "voucher_number",
        "kind",
        "reason",
        "status",
        "date",
        "memo",
        "source_type",
        "source_id",
        "reverses",
        "voided_at",
        "created_by",
        "created_at",
    )
    readonly_fields = fields
    inlines = (LineInline,)
    actions = ("void",)

    @admin.action(description="Void selected vouchers (post their reversals)", permissions=("void",))
    def void(self, request, queryset):
        for voucher_id in queryset.values_list("id", flat=True):
            try:
                services.voucher_void(voucher_id=voucher_id, memo=f"Voided in the admin by {request.user}")
            except ApiError as exc:
                self.message_user(request, f"{voucher_id}: {exc.detail}", level=messages.ERROR)

    def has_void_permission(self, request):
        return request.user.has_perm("finance.change_voucher")


@admin.register(FinanceTransaction)
class LineAdmin(BooksAdmin):
    list_display = ("id", "voucher_id", "line_number", "account_id", "currency", "debit", "credit", "posting_sequence", "date")
    list_filter = ("currency",)
    fields = (
        "id",
        "voucher",
        "line_number",
        "merchant_id",
        "account",
        "currency",
        "debit",
        "credit",
        "posting_sequence",
        "balance_after",
        "date",
    )
    readonly_fields = fields
