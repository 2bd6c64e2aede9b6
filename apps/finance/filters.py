"""Query-string filters and orderings of finance's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.finance.models import Account, FinanceTransaction, Voucher
from merchant_platform.filters import SnowflakeFilter


class AccountFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    code = django_filters.CharFilter()
    type = django_filters.ChoiceFilter(choices=Account.Type.choices)
    currency = django_filters.CharFilter()
    systemRole = django_filters.CharFilter(field_name="system_role")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("code", "code"), ("name", "name"), ("balance", "balance"), ("created_at", "createdAt"))
    )

    class Meta:
        model = Account
        fields = ()


class VoucherFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    kind = django_filters.ChoiceFilter(choices=Voucher.Kind.choices)
    status = django_filters.ChoiceFilter(choices=Voucher.Status.choices)
    fiscalYear = django_filters.NumberFilter(field_name="fiscal_year")
    voucherNumber = django_filters.CharFilter(field_name="voucher_number")
    sourceType = django_filters.CharFilter(field_name="source_type")
    sourceId = django_filters.CharFilter(field_name="source_id")
    dateFrom = django_filters.DateFilter(field_name="date", lookup_expr="gte")
    dateTo = django_filters.DateFilter(field_name="date", lookup_expr="lte")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("date", "date"), ("number", "voucherNumber"), ("created_at", "createdAt"))
    )

    class Meta:
        model = Voucher
        fields = ()


class LineFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    voucherId = SnowflakeFilter(field_name="voucher_id")
    accountId = SnowflakeFilter(field_name="account_id")
    currency = django_filters.CharFilter()
    dateFrom = django_filters.DateFilter(field_name="date", lookup_expr="gte")
    dateTo = django_filters.DateFilter(field_name="date", lookup_expr="lte")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("date", "date"), ("posting_sequence", "postingSequence")))

    class Meta:
        model = FinanceTransaction
        fields = ()
