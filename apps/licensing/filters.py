"""Query-string filters and orderings of licensing's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.licensing.models import Activation, License, Policy
from apps.licensing.states import LicenseStatus
from merchant_platform.filters import FilterSet, SnowflakeFilter, TenantFilterSet, ordering


class LicenseFilter(TenantFilterSet):
    status = django_filters.ChoiceFilter(choices=LicenseStatus.choices)
    ownerId = SnowflakeFilter()
    policyId = SnowflakeFilter()
    ordering = ordering("id", "created_at", "expires_at", "last_validated_at")

    class Meta:
        model = License


class ActivationFilter(FilterSet):
    licenseId = SnowflakeFilter()
    fingerprint = django_filters.CharFilter()
    ordering = ordering("id", "created_at")

    class Meta:
        model = Activation


class PolicyFilter(FilterSet):
    isTrial = django_filters.BooleanFilter()
    ordering = ordering("code", "created_at")

    class Meta:
        model = Policy
