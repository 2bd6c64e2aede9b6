"""Django admin for operators of the all-in-one topology. The books are read-only here: nothing is
added, edited or deleted through a form; a voucher is voided by the admin action below, which calls
the same service function as the API (services.voucher_void), so the admin cannot unbalance the
books. Corrections of COGS, INVENTORY_ADJUSTMENT, REFUND and COGS_RETURN vouchers are ADJUSTMENT
vouchers (the correction action below, or the API)."""

from django.contrib import admin

from apps.finance import services
from apps.finance.models import Account, FinanceTransaction, Voucher
from merchant_platform.admin import MerchantAdmin, MerchantFilter, ReadOnlyInline, money_column


class BooksAdmin(MerchantAdmin):
    def has_delete_permission(self, request, obj=None):
        return False  # books are append-only: no record of them is ever deleted


@admin.register(Account)
class AccountAdmin(BooksAdmin):
    list_display = ("id", "merchant", "code", "name", "type", "balance_shown", "posting_sequence", "system_role")
    list_filter = ("type", "currency", "system_role", MerchantFilter)
    search_fields = ("code", "name")
    fields = (
        "id",
        "merchant",
        "code",
        "name",
        "type",
        "currency",
        "normal_side",
        "system_role",
        "balance_shown",
        "posting_sequence",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    balance_shown = money_column("balance")


class LineAmounts:
    """A voucher line's money columns, in the line's currency."""

    debit_shown = money_column("debit")
    credit_shown = money_column("credit")
    balance_after_shown = money_column("balance_after", description="balance after")


class LineInline(LineAmounts, ReadOnlyInline):
    model = FinanceTransaction
    fields = ("line_number", "account", "debit_shown", "credit_shown", "posting_sequence", "balance_after_shown")
    readonly_fields = fields


@admin.register(Voucher)
class VoucherAdmin(BooksAdmin):
    list_display = ("id", "merchant", "voucher_number", "kind", "reason", "status", "date", "memo")
    list_filter = ("kind", "status", "fiscal_year", MerchantFilter)
    search_fields = ("voucher_number", "memo", "source_id")
    fields = (
        "id",
        "merchant",
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
    actions = ("void", "correct")

    @admin.action(description="Void selected vouchers (post their reversals)", permissions=("service",))
    def void(self, request, queryset):
        self.call_each(request, queryset, services.voucher_void, "voucher_id", memo=f"Voided in the admin by {request.user}")

    @admin.action(
        description="Correct selected COGS / stock-adjustment / refund vouchers (post a reversing ADJUSTMENT)", permissions=("service",)
    )
    def correct(self, request, queryset):
        self.call_each(request, queryset, services.voucher_correct, "voucher_id", memo=f"Corrected in the admin by {request.user}")


@admin.register(FinanceTransaction)
class LineAdmin(LineAmounts, BooksAdmin):
    list_display = ("id", "voucher_id", "merchant", "line_number", "account_id", "debit_shown", "credit_shown", "posting_sequence", "date")
    list_filter = ("currency", MerchantFilter)
    fields = (
        "id",
        "voucher",
        "line_number",
        "merchant",
        "account",
        "currency",
        "debit_shown",
        "credit_shown",
        "posting_sequence",
        "balance_after_shown",
        "date",
    )
    readonly_fields = fields
