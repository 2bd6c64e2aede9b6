"""Query-string filters and orderings of outreach's operator lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.outreach.models import Inquiry, Subscriber
from merchant_platform.filters import FilterSet, InstantFilter, SnowflakeFilter


class InquiryFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=Inquiry.Status.choices)
    merchantId = SnowflakeFilter()
    email = django_filters.CharFilter(field_name="email", lookup_expr="iexact")
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(fields=(("created_at", "createdAt"), ("updated_at", "updatedAt"), ("status", "status")))

    class Meta:
        model = Inquiry
        fields = ()


class SubscriberFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=Subscriber.Status.choices)
    email = django_filters.CharFilter(field_name="email", lookup_expr="iexact")
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(
        fields=(("created_at", "createdAt"), ("updated_at", "updatedAt"), ("email", "email"), ("status", "status"))
    )

    class Meta:
        model = Subscriber
        fields = ()
