"""Query-string filters and orderings of taxation's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.taxation.models import RoundingPolicy, TaxGroup, TaxSet
from merchant_platform.filters import FilterSet, InstantFilter, SnowflakeFilter


class TaxGroupFilter(FilterSet):
    merchantId = SnowflakeFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains", max_length=120)
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("name", "name"), ("created_at", "createdAt"), ("updated_at", "updatedAt"))
    )

    class Meta:
        model = TaxGroup
        fields = ()


class TaxSetFilter(FilterSet):
    merchantId = SnowflakeFilter()
    productId = SnowflakeFilter()
    taxGroupId = SnowflakeFilter(field_name="group_id")
    status = django_filters.ChoiceFilter(choices=TaxSet.Status.choices)
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt"), ("deactivated_at", "deactivatedAt")))

    class Meta:
        model = TaxSet
        fields = ()


class RoundingPolicyFilter(FilterSet):
    merchantId = SnowflakeFilter()
    mode = django_filters.ChoiceFilter(choices=RoundingPolicy.Mode.choices)
    ordering = django_filters.OrderingFilter(fields=(("merchant_id", "merchantId"), ("updated_at", "updatedAt")))

    class Meta:
        model = RoundingPolicy
        fields = ()
