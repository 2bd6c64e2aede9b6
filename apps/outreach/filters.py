"""Query-string filters and orderings of outreach's operator lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.outreach.models import Inquiry, Subscriber
from merchant_platform.filters import CreatedRangeFilterSet, TenantFilterSet, ordering


class InquiryFilter(TenantFilterSet, CreatedRangeFilterSet):
    status = django_filters.ChoiceFilter(choices=Inquiry.Status.choices)
    email = django_filters.CharFilter(field_name="email", lookup_expr="iexact")
    ordering = ordering("created_at", "updated_at", "status")

    class Meta:
        model = Inquiry


class SubscriberFilter(CreatedRangeFilterSet):
    status = django_filters.ChoiceFilter(choices=Subscriber.Status.choices)
    email = django_filters.CharFilter(field_name="email", lookup_expr="iexact")
    ordering = ordering("created_at", "updated_at", "email", "status")

    class Meta:
        model = Subscriber
