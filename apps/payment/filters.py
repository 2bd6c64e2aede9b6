"""Query-string filters and orderings of payment's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.payment.models import Channel, PaymentAttempt, PaymentTransaction, Refund, WebhookConfig, WebhookDelivery
from merchant_platform.filters import CreatedRangeFilterSet, FilterSet, SnowflakeFilter, TenantFilterSet, ordering


class TransactionFilter(TenantFilterSet):
    status = django_filters.ChoiceFilter(choices=PaymentTransaction.Status.choices)
    sourceId = django_filters.CharFilter()
    ordering = ordering("id", "created_at", "amount")

    class Meta:
        model = PaymentTransaction


class AttemptFilter(TenantFilterSet):
    status = django_filters.ChoiceFilter(choices=PaymentAttempt.Status.choices)
    channel = django_filters.ChoiceFilter(choices=Channel.choices)
    transactionId = SnowflakeFilter()
    code = django_filters.CharFilter()
    ordering = ordering("id", "created_at")

    class Meta:
        model = PaymentAttempt


class RefundFilter(TenantFilterSet, CreatedRangeFilterSet):
    status = django_filters.ChoiceFilter(choices=Refund.Status.choices)
    transactionId = SnowflakeFilter()
    channel = django_filters.ChoiceFilter(choices=Channel.choices)
    ordering = ordering("id", "created_at", "amount")

    class Meta:
        model = Refund


class WebhookFilter(TenantFilterSet):
    status = django_filters.ChoiceFilter(choices=WebhookConfig.Status.choices)
    ordering = ordering("id", "created_at", "name")

    class Meta:
        model = WebhookConfig


class DeliveryFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=WebhookDelivery.Status.choices)
    webhookId = SnowflakeFilter()
    eventType = django_filters.CharFilter()
    ordering = ordering("id", "created_at")

    class Meta:
        model = WebhookDelivery
