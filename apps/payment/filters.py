"""Query-string filters and orderings of payment's lists (camelCase, as the JSON)."""

from __future__ import annotations

import django_filters

from apps.payment.models import Channel, PaymentAttempt, PaymentTransaction, WebhookConfig, WebhookDelivery
from merchant_platform.filters import SnowflakeFilter


class TransactionFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=PaymentTransaction.Status.choices)
    merchantId = SnowflakeFilter(field_name="merchant_id")
    sourceId = django_filters.CharFilter(field_name="source_id")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt"), ("amount", "amount")))

    class Meta:
        model = PaymentTransaction
        fields = ()


class AttemptFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=PaymentAttempt.Status.choices)
    channel = django_filters.ChoiceFilter(choices=Channel.choices)
    merchantId = SnowflakeFilter(field_name="merchant_id")
    transactionId = SnowflakeFilter(field_name="transaction_id")
    code = django_filters.CharFilter()
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = PaymentAttempt
        fields = ()


class WebhookFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=WebhookConfig.Status.choices)
    merchantId = SnowflakeFilter(field_name="merchant_id")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt"), ("name", "name")))

    class Meta:
        model = WebhookConfig
        fields = ()


class DeliveryFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=WebhookDelivery.Status.choices)
    webhookId = SnowflakeFilter(field_name="webhook_id")
    eventType = django_filters.CharFilter(field_name="event_type")
    ordering = django_filters.OrderingFilter(fields=(("id", "id"), ("created_at", "createdAt")))

    class Meta:
        model = WebhookDelivery
        fields = ()
