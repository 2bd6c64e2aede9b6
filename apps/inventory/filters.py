"""Query-string filters and orderings of inventory's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.inventory.models import Item, Location, Note, Operation, PurchaseOrder, ReferenceType, Stock, Ticket, Tracking
from merchant_platform.filters import CreatedRangeFilterSet, SnowflakeFilter, TenantFilterSet, ordering


class LocationFilter(TenantFilterSet):
    isDefault = django_filters.BooleanFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    ordering = ordering("id", "name", "created_at")

    class Meta:
        model = Location


class ItemFilter(TenantFilterSet):
    variantId = SnowflakeFilter()
    productId = SnowflakeFilter()
    sku = django_filters.CharFilter()
    status = django_filters.ChoiceFilter(choices=Item.Status.choices)
    allowOversell = django_filters.BooleanFilter()
    ordering = ordering("id", "sku", "created_at")

    class Meta:
        model = Item


class StockFilter(TenantFilterSet):
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter()
    variantId = SnowflakeFilter(field_name="item__variant_id")
    sku = django_filters.CharFilter(field_name="item__sku")
    minAvailable = django_filters.NumberFilter(field_name="available", lookup_expr="gte")
    maxAvailable = django_filters.NumberFilter(field_name="available", lookup_expr="lte")
    ordering = ordering("id", "quantity_on_hand", "available", "updated_at")

    class Meta:
        model = Stock


class TrackingFilter(TenantFilterSet, CreatedRangeFilterSet):
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter()
    stockId = SnowflakeFilter()
    operation = django_filters.ChoiceFilter(choices=Operation.choices)
    referenceType = django_filters.ChoiceFilter(choices=ReferenceType.choices)
    referenceId = django_filters.CharFilter()
    note = django_filters.ChoiceFilter(choices=[c for c in Note.choices if c[0]])
    ordering = ordering("id", "created_at")

    class Meta:
        model = Tracking


class TicketFilter(TenantFilterSet):
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter()
    status = django_filters.ChoiceFilter(choices=Ticket.Status.choices)
    ordering = ordering("id", "created_at")

    class Meta:
        model = Ticket


class PurchaseOrderFilter(TenantFilterSet):
    status = django_filters.ChoiceFilter(choices=PurchaseOrder.Status.choices)
    supplier = django_filters.CharFilter(field_name="supplier", lookup_expr="icontains")
    ordering = ordering("id", "created_at")

    class Meta:
        model = PurchaseOrder
