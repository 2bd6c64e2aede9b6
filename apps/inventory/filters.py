"""Query-string filters and orderings of inventory's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.inventory.models import Item, Location, Note, Operation, PurchaseOrder, ReferenceType, Stock, Ticket, Tracking
from merchant_platform.filters import InstantFilter, SnowflakeFilter


class LocationFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    isDefault = django_filters.BooleanFilter(field_name="is_default")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("name", "name"), ("created_at", "createdAt")))

    class Meta:
        model = Location
        fields = ()


class ItemFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    variantId = SnowflakeFilter(field_name="variant_id")
    productId = SnowflakeFilter(field_name="product_id")
    sku = django_filters.CharFilter()
    status = django_filters.ChoiceFilter(choices=Item.Status.choices)
    allowOversell = django_filters.BooleanFilter(field_name="allow_oversell")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("sku", "sku"), ("created_at", "createdAt")))

    class Meta:
        model = Item
        fields = ()


class StockFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter(field_name="location_id")
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


class TrackingFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter(field_name="location_id")
    stockId = SnowflakeFilter(field_name="stock_id")
    operation = django_filters.ChoiceFilter(choices=Operation.choices)
    referenceType = django_filters.ChoiceFilter(field_name="reference_type", choices=ReferenceType.choices)
    referenceId = django_filters.CharFilter(field_name="reference_id")
    note = django_filters.ChoiceFilter(choices=[c for c in Note.choices if c[0]])
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = Tracking
        fields = ()


class TicketFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    inventoryItemId = SnowflakeFilter(field_name="item_id")
    locationId = SnowflakeFilter(field_name="location_id")
    status = django_filters.ChoiceFilter(choices=Ticket.Status.choices)
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = Ticket
        fields = ()


class PurchaseOrderFilter(django_filters.FilterSet):
    merchantId = SnowflakeFilter(field_name="merchant_id")
    status = django_filters.ChoiceFilter(choices=PurchaseOrder.Status.choices)
    supplier = django_filters.CharFilter(field_name="supplier", lookup_expr="icontains")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = PurchaseOrder
        fields = ()
