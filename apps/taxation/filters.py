"""Query-string filters and orderings of taxation's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.taxation.models import RoundingPolicy, TaxGroup, TaxSet
from merchant_platform.filters import CreatedRangeFilterSet, SnowflakeFilter, TenantFilterSet, ordering


class TaxGroupFilter(TenantFilterSet, CreatedRangeFilterSet):
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains", max_length=120)
    ordering = ordering("id", "name", "created_at", "updated_at")

    class Meta:
        model = TaxGroup


class TaxSetFilter(TenantFilterSet, CreatedRangeFilterSet):
    productId = SnowflakeFilter()
    taxGroupId = SnowflakeFilter(field_name="group_id")
    status = django_filters.ChoiceFilter(choices=TaxSet.Status.choices)
    ordering = ordering("id", "created_at", "deactivated_at")

    class Meta:
        model = TaxSet


class RoundingPolicyFilter(TenantFilterSet):
    mode = django_filters.ChoiceFilter(choices=RoundingPolicy.Mode.choices)
    ordering = ordering("merchant_id", "updated_at")

    class Meta:
        model = RoundingPolicy
