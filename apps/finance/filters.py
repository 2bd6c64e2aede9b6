"""Query-string filters and orderings of finance's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.finance.models import Account, FinanceTransaction, Voucher
from merchant_platform.filters import SnowflakeFilter, TenantFilterSet, ordering


class AccountFilter(TenantFilterSet):
    code = django_filters.CharFilter()
    type = django_filters.ChoiceFilter(choices=Account.Type.choices)
    currency = django_filters.CharFilter()
    systemRole = django_filters.CharFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    ordering = ordering("id", "code", "name", "balance", "created_at")

    class Meta:
        model = Account


class VoucherFilter(TenantFilterSet):
    kind = django_filters.ChoiceFilter(choices=Voucher.Kind.choices)
    status = django_filters.ChoiceFilter(choices=Voucher.Status.choices)
    fiscalYear = django_filters.NumberFilter()
    voucherNumber = django_filters.CharFilter()
    sourceType = django_filters.CharFilter()
    sourceId = django_filters.CharFilter()
    dateFrom = django_filters.DateFilter(field_name="date", lookup_expr="gte")
    dateTo = django_filters.DateFilter(field_name="date", lookup_expr="lte")
    ordering = ordering("id", "date", ("number", "voucherNumber"), "created_at")

    class Meta:
        model = Voucher


class LineFilter(TenantFilterSet):
    voucherId = SnowflakeFilter()
    accountId = SnowflakeFilter()
    currency = django_filters.CharFilter()
    dateFrom = django_filters.DateFilter(field_name="date", lookup_expr="gte")
    dateTo = django_filters.DateFilter(field_name="date", lookup_expr="lte")
    ordering = ordering("id", "date", "posting_sequence")

    class Meta:
        model = FinanceTransaction
