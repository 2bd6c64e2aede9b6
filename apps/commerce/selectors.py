"""Reads of commerce that are more than a one-line query."""

from __future__ import annotations

from django.db.models import QuerySet

from merchant_platform.models import Configuration

POLICY_DB = "default"  # Configuration lives in the shared `public` schema


def integrations() -> QuerySet[Configuration]:
    """Every live provider integration of every merchant (views scope it per caller)."""
    return Configuration.objects.using(POLICY_DB).filter(
        group=Configuration.Group.INTEGRATION, principal_type=Configuration.PrincipalType.MERCHANT
    )
