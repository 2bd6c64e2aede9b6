"""HTTP of payment: each view translates a request into a service call and back.

Operator routes (transactions, attempts, webhooks) take a user token or the platform services'
HTTP Basic credentials (the sale side opens transactions) and go through the policy layer; the
tenant is the record's merchant_id, so another merchant's record answers 404.

The IPN routes (spec 4.9) are public: the provider authenticates each body with its HMAC-SHA512
signature. They always answer 200 with the provider's reply code (docs/services/payment.md).
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.parsers import FormParser
from rest_framework.response import Response

from apps.payment import services
from apps.payment.filters import AttemptFilter, DeliveryFilter, TransactionFilter, WebhookFilter
from apps.payment.models import Channel, IdempotencyKey, PaymentAttempt, PaymentTransaction, WebhookConfig, WebhookDelivery
from apps.payment.serializers import (
    AttemptCreateSerializer,
    AttemptSerializer,
    DeliverySerializer,
    TransactionCreateSerializer,
    TransactionSerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookSerializer,
    WebhookUpdateSerializer,
)
from merchant_platform import idempotency
from merchant_platform.idempotency import Created, IdempotentCreateMixin
from merchant_platform.parsers import JSONParser
from merchant_platform.policy import CREATE
from merchant_platform.views import PublicView, ServiceViewSet, user_id_of

TRANSACTION, ATTEMPT, WEBHOOK = "payment.Transaction", "payment.Attempt", "payment.Webhook"
ILLEGAL_TRANSITION = OpenApiResponse(
    description="TRANSACTION_INVALID_TRANSITION / ATTEMPT_INVALID_TRANSITION (the state machine forbids it), "
    "ATTEMPT_UNRESOLVED (an attempt waits for the provider), ATTEMPT_OPEN (a new attempt while one is open)."
)


def is_service(request) -> bool:
    """Whether the caller is a platform service (HTTP Basic service credentials), not a user."""
    return bool(getattr(request.user, "is_service", False))


class TransactionViewSet(IdempotentCreateMixin, ServiceViewSet):
    policy_resource = TRANSACTION
    policy_tenant_field = "merchant_id"
    idempotency_keys, idempotency_using = IdempotencyKey, services.DB
    policy_owner_field = "created_by"
    policy_actions = {"add_attempt": CREATE}
    serializer_class = TransactionSerializer
    filterset_class = TransactionFilter
    queryset = PaymentTransaction.objects.prefetch_related("attempts")

    def _answer(self, transaction_id: int, status_code: int) -> Response:
        txn = PaymentTransaction.objects.prefetch_related("attempts").get(pk=transaction_id)
        return Response(TransactionSerializer(txn).data, status=status_code)

    @extend_schema(
        request=TransactionCreateSerializer,
        responses={
            201: TransactionSerializer,
            200: OpenApiResponse(TransactionSerializer, description="A live transaction of the merchant already has this sourceId."),
            409: OpenApiResponse(description="SOURCE_ID_CONFLICT: the sourceId exists with another amount or currency."),
            422: idempotency.RESPONSES[422],
        },
        parameters=[idempotency.HEADER],
    )
    def create(self, request):
        """Open a transaction and its first attempt, sent to the channel's provider before the answer
        (a QR attempt carries its qrPayload). The same sourceId returns the existing transaction.
        An `Idempotency-Key` header replays the first answer for the same key and body."""
        data = self.validated(TransactionCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        return self.idempotent(
            f"transactions.create:{data['merchant_id']}",  # a key is the caller's in one merchant
            write=lambda: self._open(request, data),
            answer=lambda transaction_id: TransactionSerializer(self.queryset.get(pk=transaction_id)).data,
        )

    def _open(self, request, data) -> Created:
        # Only the sale side's service credentials open an ORDER (a sourceId consumers match orders on).
        source_type = PaymentTransaction.SourceType.ORDER if is_service(request) else PaymentTransaction.SourceType.MANUAL
        created = services.transaction_create(**data, created_by=user_id_of(request), source_type=source_type)
        attempt = created.attempt
        return Created(
            created.transaction.id,
            status.HTTP_201_CREATED if created.created else status.HTTP_200_OK,
            # The provider is called once the transaction (and the request's key) committed.
            then=None if attempt is None else lambda: services.attempt_send(attempt_id=attempt.id),
        )

    @extend_schema(request=None, responses={200: TransactionSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/cancel")
    def cancel(self, request, pk=None):
        """Cancel a NEW transaction and its open attempts."""
        txn = services.transaction_cancel(transaction_id=self.get_object().id)
        return self._answer(txn.id, status.HTTP_200_OK)

    @extend_schema(request=AttemptCreateSerializer, responses={201: AttemptSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="attempts")
    def add_attempt(self, request, pk=None):
        """A new attempt on a NEW transaction (for example after an expired QR), sent to its provider."""
        txn = self.get_object()
        attempt = services.attempt_create(transaction_id=txn.id, **self.validated(AttemptCreateSerializer))
        attempt = services.attempt_send(attempt_id=attempt.id)
        return Response(AttemptSerializer(attempt).data, status=status.HTTP_201_CREATED)


class AttemptViewSet(ServiceViewSet):
    policy_resource = ATTEMPT
    policy_tenant_field = "merchant_id"
    serializer_class = AttemptSerializer
    filterset_class = AttemptFilter
    queryset = PaymentAttempt.objects.all()

    @extend_schema(request=None, responses={200: AttemptSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/cancel")
    def cancel(self, request, pk=None):
        return Response(AttemptSerializer(services.attempt_cancel(attempt_id=self.get_object().id)).data)


class WebhookViewSet(ServiceViewSet):
    """A merchant's webhook subscriptions (spec 2.1 WebhookConfig). The signing secret is in the
    creation answer only; it is stored sealed (AES-256-GCM) and never shown again."""

    policy_resource = WEBHOOK
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    serializer_class = WebhookSerializer
    filterset_class = WebhookFilter
    queryset = WebhookConfig.objects.all()

    def get_queryset(self):
        # A platform service's subscription (internal) is not the merchant's: users never see it.
        queryset = super().get_queryset()
        return queryset if is_service(self.request) else queryset.filter(internal=False)

    def _body(self, serializer_class, record=None):
        data = dict(self.validated(serializer_class, record=record))
        if "metadata" in data:
            data["metadata"] = dict(data["metadata"])
        return data

    @extend_schema(request=WebhookCreateSerializer, responses={201: WebhookCreatedSerializer})
    def create(self, request):
        data = self._body(WebhookCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        config, secret = services.webhook_create(**data, created_by=user_id_of(request), internal=is_service(request))
        return Response(WebhookCreatedSerializer(config, context={"secret": secret}).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=WebhookUpdateSerializer, responses={200: WebhookSerializer})
    def partial_update(self, request, pk=None):
        config = self.get_object()
        data = self._body(WebhookUpdateSerializer, config)
        return Response(WebhookSerializer(services.webhook_update(webhook_id=config.id, by_user=not is_service(request), **data)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.webhook_delete(webhook_id=self.get_object().id, by_user=not is_service(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryViewSet(ServiceViewSet):
    """The delivery log: each event sent to a webhook, its tries (status code, error, latency)."""

    policy_resource = WEBHOOK
    policy_tenant_field = "merchant_id"
    serializer_class = DeliverySerializer
    filterset_class = DeliveryFilter
    queryset = WebhookDelivery.objects.all()

    def get_queryset(self):
        queryset = super().get_queryset()
        return queryset if is_service(self.request) else queryset.filter(webhook__internal=False)

    @extend_schema(request=None, responses={200: DeliverySerializer, 409: OpenApiResponse(description="DELIVERY_PENDING")})
    @action(detail=True, methods=["post"], url_path="actions/redeliver")
    def redeliver(self, request, pk=None):
        """Send the delivery again, with the same webhook-id."""
        return Response(
            DeliverySerializer(services.webhook_redeliver(delivery_id=self.get_object().id, by_user=not is_service(request))).data
        )


IPN_REPLY = inline_serializer("IpnReply", {"RspCode": serializers.CharField(), "Message": serializers.CharField()})


class IpnView(PublicView):
    """A provider's IPN (spec 2.3, 4.9): JSON or form fields, signed with HMAC-SHA512. The answer is
    always 200 with {"RspCode", "Message"}: 00 confirmed (also for a repeated IPN of a confirmed
    attempt), 01 unknown attempt, 02 attempt already final, 04 wrong amount, 97 bad signature,
    99 anything else (missing or malformed field)."""

    parser_classes = (JSONParser, FormParser)
    channel: str = ""

    @property
    def max_body_bytes(self) -> int:
        return settings.PAYMENT_IPN_MAX_BODY_BYTES

    def handle_exception(self, exc):
        # A body that does not parse is the provider's problem to hear about in its own codes.
        if getattr(exc, "status_code", 500) in (400, 415):
            return self._reply(services.OTHER)
        return super().handle_exception(exc)

    def _reply(self, code: str) -> Response:
        return Response({"RspCode": code, "Message": services.REPLY_MESSAGES[code]})

    @extend_schema(request=inline_serializer("IpnData", {"prov_TxnRef": serializers.CharField()}), responses={200: IPN_REPLY})
    def post(self, request):
        data = request.data
        fields = {key: data.get(key) for key in data} if hasattr(data, "getlist") else data
        return self._reply(services.ipn_confirm(channel=self.channel, fields=fields))


class QrIpnView(IpnView):
    channel = Channel.QR.value


class PhonePosIpnView(IpnView):
    channel = Channel.PHONE_POS.value


class SmartPosIpnView(IpnView):
    channel = Channel.SMART_POS.value


class SystemIpnView(IpnView):
    channel = Channel.SYSTEM.value
