"""Query-string filters and orderings of identity's operator lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.identity.models import User
from merchant_platform.filters import FilterSet, ordering
from merchant_platform.models import PolicyDefinition


class UserFilter(FilterSet):
    email = django_filters.CharFilter(field_name="email", lookup_expr="iexact")
    phone = django_filters.CharFilter()
    username = django_filters.CharFilter(field_name="username", lookup_expr="iexact")
    isActive = django_filters.BooleanFilter()
    ordering = ordering("id", "created_at", "last_sign_in_at")

    class Meta:
        model = User


class PolicyFilter(FilterSet):
    kind = django_filters.ChoiceFilter(choices=PolicyDefinition.Kind.choices)
    subjectId = django_filters.CharFilter()
    domain = django_filters.CharFilter()
    role = django_filters.CharFilter()
    ordering = ordering("id", "created_at")

    class Meta:
        model = PolicyDefinition
