"""Reads of inventory that are more than a one-line query."""

from __future__ import annotations

from django.db.models import F, QuerySet

from apps.inventory.models import Stock


def stocks() -> QuerySet[Stock]:
    """Live stock rows with `available` (on hand - reserved) as a column, filterable and orderable."""
    return Stock.objects.annotate(available=F("quantity_on_hand") - F("reserved"))
