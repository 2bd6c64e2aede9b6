"""Query-string filters of the notifications list (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.signal.models import Notification
from merchant_platform.filters import FilterSet, InstantFilter, ordering


class NotificationFilter(FilterSet):
    # A choice, not BooleanFilter: that one reads an unknown word as "no filter" instead of a 400.
    unread = django_filters.ChoiceFilter(
        choices=(("true", "true"), ("false", "false")), method="filter_unread", help_text="true: only unread; false: only read."
    )
    topic = django_filters.CharFilter(field_name="topic", max_length=200)
    room = django_filters.CharFilter(field_name="room", max_length=200)
    since = InstantFilter(field_name="created_at", lookup_expr="gte", help_text="Created at or after this instant (ISO 8601).")
    ordering = ordering("created_at")

    def filter_unread(self, queryset, name, value):
        return queryset.filter(read_at__isnull=value == "true")

    class Meta:
        model = Notification
