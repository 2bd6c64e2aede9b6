"""Query-string filters and orderings of commerce's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters
from django import forms

from apps.commerce.models import Merchant, Product, ProductMedia, ProductVariant, SaleOrder
from merchant_platform.filters import MAX_ID, FilterSet, InstantFilter, SnowflakeFilter, SnowflakeInFilter, TenantFilterSet, ordering
from merchant_platform.models import Configuration


class AmountFormField(forms.IntegerField):
    def __init__(self, **kwargs):
        super().__init__(min_value=0, max_value=MAX_ID, **kwargs)


class AmountFilter(django_filters.NumberFilter):
    """An amount in minor units: a whole number from 0 that a bigint column can hold."""

    field_class = AmountFormField


class MerchantFilter(FilterSet):
    ids = SnowflakeInFilter(field_name="id", help_text="Merchants with one of these ids (comma-separated, at most 200).")
    status = django_filters.ChoiceFilter(choices=Merchant.Status.choices)
    slug = django_filters.CharFilter()
    country = django_filters.CharFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    ordering = ordering("id", "name", "slug", "created_at")

    class Meta:
        model = Merchant


class ProductFilter(TenantFilterSet):
    status = django_filters.ChoiceFilter(choices=Product.Status.choices)
    taxGroupId = SnowflakeFilter()
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    ordering = ordering("id", "name", "created_at", "updated_at")

    class Meta:
        model = Product


class VariantFilter(TenantFilterSet):
    primaryProductId = SnowflakeFilter()
    sku = django_filters.CharFilter()
    status = django_filters.ChoiceFilter(choices=ProductVariant.Status.choices)
    currency = django_filters.CharFilter()
    minPriceAmount = AmountFilter(field_name="price_amount", lookup_expr="gte")
    maxPriceAmount = AmountFilter(field_name="price_amount", lookup_expr="lte")
    ordering = ordering("id", "sku", "price_amount", "created_at")

    class Meta:
        model = ProductVariant


class IntegrationFilter(FilterSet):
    merchantId = SnowflakeFilter(field_name="principal_id")
    code = django_filters.CharFilter()
    environment = django_filters.ChoiceFilter(choices=Configuration.Environment.choices)
    status = django_filters.ChoiceFilter(choices=Configuration.Status.choices)
    ordering = ordering("id", "code", "created_at")

    class Meta:
        model = Configuration


class MediaFilter(TenantFilterSet):
    productId = SnowflakeFilter()
    ordering = ordering("id", "created_at", "size_bytes")

    class Meta:
        model = ProductMedia


class SaleOrderFilter(TenantFilterSet):
    status = django_filters.ChoiceFilter(choices=SaleOrder.Status.choices)
    paymentTransactionId = SnowflakeFilter()
    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    placedAfter = InstantFilter(field_name="placed_at", lookup_expr="gte")
    ordering = ordering("id", "created_at", "placed_at", "gross_amount")

    class Meta:
        model = SaleOrder
