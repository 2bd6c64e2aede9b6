"""Query-string filters and orderings of licensing's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.licensing.models import Activation, License, Policy
from apps.licensing.states import LicenseStatus
from merchant_platform.filters import FilterSet, SnowflakeFilter


class LicenseFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=LicenseStatus.choices)
    ownerId = SnowflakeFilter()
    merchantId = SnowflakeFilter()
    policyId = SnowflakeFilter()
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("created_at", "createdAt"), ("expires_at", "expiresAt"), ("last_validated_at", "lastValidatedAt"))
    )

    class Meta:
        model = License
        fields = ()


class ActivationFilter(FilterSet):
    licenseId = SnowflakeFilter()
    fingerprint = django_filters.CharFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = Activation
        fields = ()


class PolicyFilter(FilterSet):
    isTrial = django_filters.BooleanFilter()
    ordering = django_filters.OrderingFilter(fields=(("code", "code"), ("created_at", "createdAt")))

    class Meta:
        model = Policy
        fields = ()
