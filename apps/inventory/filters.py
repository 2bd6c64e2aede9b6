"""Query-string filters and orderings of inventory's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.inventory.models import Item, Location, Note, Operation, PurchaseOrder, ReferenceType, Stock, Ticket, Tracking
from merchant_platform.filters import FilterSet, InstantFilter, SnowflakeFilter


class LocationFilter(FilterSet):
    merchantId = SnowflakeFilter()
    isDefault = django_filters.BooleanFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("name", "name"), ("created_at", "createdAt")))

    class Meta:
        model = Location
        fields = ()


class ItemFilter(FilterSet):
    merchantId = SnowflakeFilter()
    variantId = SnowflakeFilter()
    productId = SnowflakeFilter()
    sku = django_filters.CharFilter()
    status = django_filters.ChoiceFilter(choices=Item.Status.choices)
    allowOversell = django_filters.BooleanFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("sku", "sku"), ("created_at", "createdAt")))

    class Meta:
        model = Item
        fields = ()


class StockFilter(FilterSet):
    merchantId = SnowflakeFilter()
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter()
    variantId = SnowflakeFilter(field_name="item__variant_id")
    sku = django_filters.CharFilter(field_name="item__sku")
    minAvailable = django_filters.NumberFilter(field_name="available", lookup_expr="gte")
    maxAvailable = django_filters.NumberFilter(field_name="available", lookup_expr="lte")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("quantity_on_hand", "quantityOnHand"), ("available", "available"), ("updated_at", "updatedAt"))
    )

    class Meta:
        model = Stock
        fields = ()


class TrackingFilter(FilterSet):
    merchantId = SnowflakeFilter()
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter()
    stockId = SnowflakeFilter()
    operation = django_filters.ChoiceFilter(choices=Operation.choices)
    referenceType = django_filters.ChoiceFilter(choices=ReferenceType.choices)
    referenceId = django_filters.CharFilter()
    note = django_filters.ChoiceFilter(choices=[c for c in Note.choices if c[0]])
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = Tracking
        fields = ()


class TicketFilter(FilterSet):
    merchantId = SnowflakeFilter()
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter()
    status = django_filters.ChoiceFilter(choices=Ticket.Status.choices)
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = Ticket
        fields = ()


class PurchaseOrderFilter(FilterSet):
    merchantId = SnowflakeFilter()
    status = django_filters.ChoiceFilter(choices=PurchaseOrder.Status.choices)
    supplier = django_filters.CharFilter(field_name="supplier", lookup_expr="icontains")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = PurchaseOrder
        fields = ()
