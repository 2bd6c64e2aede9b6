"""Query-string filters and orderings of licensing's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.licensing.models import Activation, License, Policy
from apps.licensing.states import LicenseStatus
from merchant_platform.filters import SnowflakeFilter


class LicenseFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=LicenseStatus.choices)
    ownerId = SnowflakeFilter(field_name="owner_id")
    merchantId = SnowflakeFilter(field_name="merchant_id")
    policyId = SnowflakeFilter(field_name="policy_id")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("created_at", "createdAt"), ("expires_at", "expiresAt"), ("last_validated_at", "lastValidatedAt"))
    )

    class Meta:
        model = License
        fields = ()


class ActivationFilter(django_filters.FilterSet):
    licenseId = SnowflakeFilter(field_name="license_id")
    fingerprint = django_filters.CharFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = Activation
        fields = ()


class PolicyFilter(django_filters.FilterSet):
    isTrial = django_filters.BooleanFilter(field_name="is_trial")
    ordering = django_filters.OrderingFilter(fields=(("code", "code"), ("created_at", "createdAt")))

    class Meta:
        model = Policy
        fields = ()
