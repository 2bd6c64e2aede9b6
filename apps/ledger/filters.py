"""Query-string filters and orderings of the ledger job list (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.ledger.models import LedgerJob
from merchant_platform.filters import CreatedRangeFilterSet, TenantFilterSet, ordering


class LedgerJobFilter(TenantFilterSet, CreatedRangeFilterSet):
    status = django_filters.ChoiceFilter(choices=LedgerJob.Status.choices)
    type = django_filters.ChoiceFilter(choices=LedgerJob.Type.choices)
    # Not `format`: DRF reserves that query parameter for content negotiation.
    fileFormat = django_filters.ChoiceFilter(field_name="format", choices=LedgerJob.Format.choices)
    draft = django_filters.BooleanFilter()
    ordering = ordering("created_at", "updated_at", "status", "date_from")

    class Meta:
        model = LedgerJob
