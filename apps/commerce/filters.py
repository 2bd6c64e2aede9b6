"""Query-string filters and orderings of commerce's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters
from django import forms

from apps.commerce.models import Merchant, Product, ProductMedia, ProductVariant, SaleOrder
from merchant_platform.filters import MAX_ID, FilterSet, InstantFilter, SnowflakeFilter
from merchant_platform.models import Configuration


class AmountFormField(forms.IntegerField):
    def __init__(self, **kwargs):
        super().__init__(min_value=0, max_value=MAX_ID, **kwargs)


class AmountFilter(django_filters.NumberFilter):
    """An amount in minor units: a whole number from 0 that a bigint column can hold."""

    field_class = AmountFormField


class MerchantFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=Merchant.Status.choices)
    slug = django_filters.CharFilter()
    country = django_filters.CharFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("name", "name"), ("slug", "slug"), ("created_at", "createdAt")))

    class Meta:
        model = Merchant
        fields = ()


class ProductFilter(FilterSet):
    merchantId = SnowflakeFilter()
    status = django_filters.ChoiceFilter(choices=Product.Status.choices)
    taxGroupId = SnowflakeFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("name", "name"), ("created_at", "createdAt"), ("updated_at", "updatedAt"))
    )

    class Meta:
        model = Product
        fields = ()


class VariantFilter(FilterSet):
    merchantId = SnowflakeFilter()
    primaryProductId = SnowflakeFilter()
    sku = django_filters.CharFilter()
    status = django_filters.ChoiceFilter(choices=ProductVariant.Status.choices)
    currency = django_filters.CharFilter()
    minPriceAmount = AmountFilter(field_name="price_amount", lookup_expr="gte")
    maxPriceAmount = AmountFilter(field_name="price_amount", lookup_expr="lte")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("sku", "sku"), ("price_amount", "priceAmount"), ("created_at", "createdAt"))
    )

    class Meta:
        model = ProductVariant
        fields = ()


class IntegrationFilter(FilterSet):
    merchantId = SnowflakeFilter(field_name="principal_id")
    code = django_filters.CharFilter()
    environment = django_filters.ChoiceFilter(choices=Configuration.Environment.choices)
    status = django_filters.ChoiceFilter(choices=Configuration.Status.choices)
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("code", "code"), ("created_at", "createdAt")))

    class Meta:
        model = Configuration
        fields = ()


class MediaFilter(FilterSet):
    merchantId = SnowflakeFilter()
    productId = SnowflakeFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt"), ("size_bytes", "sizeBytes")))

    class Meta:
        model = ProductMedia
        fields = ()


class SaleOrderFilter(FilterSet):
    merchantId = SnowflakeFilter()
    status = django_filters.ChoiceFilter(choices=SaleOrder.Status.choices)
    paymentTransactionId = SnowflakeFilter()
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    placedAfter = InstantFilter(field_name="placed_at", lookup_expr="gte")
    ordering = django_filters.OrderingFilter(
        fields=(("id", "id"), ("created_at", "createdAt"), ("placed_at", "placedAt"), ("gross_amount", "grossAmount"))
    )

    class Meta:
        model = SaleOrder
        fields = ()
