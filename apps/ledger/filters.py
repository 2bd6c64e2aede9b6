"""Query-string filters and orderings of the ledger job list (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.ledger.models import LedgerJob
from merchant_platform.filters import FilterSet, InstantFilter, SnowflakeFilter


class LedgerJobFilter(FilterSet):
    merchantId = SnowflakeFilter()
    status = django_filters.ChoiceFilter(choices=LedgerJob.Status.choices)
    type = django_filters.ChoiceFilter(choices=LedgerJob.Type.choices)
    # Not `format`: DRF reserves that query parameter for content negotiation.
    fileFormat = django_filters.ChoiceFilter(field_name="format", choices=LedgerJob.Format.choices)
    draft = django_filters.BooleanFilter()
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(
        fields=(("created_at", "createdAt"), ("updated_at", "updatedAt"), ("status", "status"), ("date_from", "dateFrom"))
    )

    class Meta:
        model = LedgerJob
        fields = ()
