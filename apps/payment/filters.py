"""Query-string filters and orderings of payment's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.payment.models import Channel, PaymentAttempt, PaymentTransaction, WebhookConfig, WebhookDelivery
from merchant_platform.filters import FilterSet, SnowflakeFilter


class TransactionFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=PaymentTransaction.Status.choices)
    merchantId = SnowflakeFilter()
    sourceId = django_filters.CharFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt"), ("amount", "amount")))

    class Meta:
        model = PaymentTransaction
        fields = ()


class AttemptFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=PaymentAttempt.Status.choices)
    channel = django_filters.ChoiceFilter(choices=Channel.choices)
    merchantId = SnowflakeFilter()
    transactionId = SnowflakeFilter()
    code = django_filters.CharFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = PaymentAttempt
        fields = ()


class WebhookFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=WebhookConfig.Status.choices)
    merchantId = SnowflakeFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt"), ("name", "name")))

    class Meta:
        model = WebhookConfig
        fields = ()


class DeliveryFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=WebhookDelivery.Status.choices)
    webhookId = SnowflakeFilter()
    eventType = django_filters.CharFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = WebhookDelivery
        fields = ()
