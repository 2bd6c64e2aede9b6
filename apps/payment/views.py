"""HTTP of payment: each view translates a request into a service call and back.

Operator routes (transactions, attempts, webhooks) take a user token or the platform services'
HTTP Basic credentials (the sale side opens transactions) and go through the policy layer; the
tenant is the record's merchant_id, so another merchant's record answers 404.

The IPN routes (spec 4.9) are public: the provider authenticates each body with its HMAC-SHA512
signature. They always answer 200 with the provider's reply code (docs/services/payment.md).
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.parsers import FormParser
from rest_framework.response import Response

from apps.payment import services
from apps.payment.filters import AttemptFilter, DeliveryFilter, RefundFilter, TransactionFilter, WebhookFilter
from apps.payment.models import Channel, IdempotencyKey, PaymentAttempt, PaymentTransaction, Refund, WebhookConfig, WebhookDelivery
from apps.payment.serializers import (
    AttemptCreateSerializer,
    AttemptSerializer,
    DeliverySerializer,
    RefundConfirmSerializer,
    RefundCreateSerializer,
    RefundFailSerializer,
    RefundSerializer,
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
from merchant_platform.policy import CREATE, READ, scope_queryset
from merchant_platform.views import OperatorViewSet, PublicView, ServiceViewSet, user_id_of

TRANSACTION, ATTEMPT, WEBHOOK, REFUND = "payment.Transaction", "payment.Attempt", "payment.Webhook", "payment.Refund"
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


REFUND_ERRORS = {
    400: OpenApiResponse(
        description="REFUND_CURRENCY_MISMATCH, REFUND_LINE_UNKNOWN, REFUND_LINE_QUANTITY_EXCEEDED, AMOUNT_TOO_LARGE, "
        "or a field that is wrong."
    ),
    404: OpenApiResponse(description="No transaction of the caller's (or of the merchantId a platform service names) has this id."),
    409: OpenApiResponse(
        description="REFUND_EXCEEDS_REFUNDABLE (more than is left to refund), TRANSACTION_NOT_REFUNDABLE (not SETTLED or "
        "PARTIALLY_REFUNDED, or an ORDER refunded by a user, a MANUAL one by a service), IDEMPOTENCY_KEY_IN_PROGRESS."
    ),
    422: idempotency.RESPONSES[422],
}
TRANSACTION_PATH = OpenApiParameter("transactionId", str, OpenApiParameter.PATH, description="The transaction's id.")


@extend_schema(parameters=[TRANSACTION_PATH])
class TransactionRefundViewSet(IdempotentCreateMixin, mixins.ListModelMixin, OperatorViewSet):
    """A transaction's refunds (`/transactions/{transactionId}/refunds`): listed, and made. The
    transaction must be the caller's: a user's in a merchant where it may act on refunds, a platform
    service's in the `merchantId` it names; otherwise 404."""

    authentication_classes = ServiceViewSet.authentication_classes
    policy_resource = REFUND
    policy_tenant_field = "merchant_id"
    idempotency_keys, idempotency_using = IdempotencyKey, services.DB
    serializer_class = RefundSerializer
    queryset = Refund.objects.select_related("transaction")

    def _transaction(self, merchant_id: int | None = None) -> PaymentTransaction:
        visible = scope_queryset(PaymentTransaction.objects.all(), self.request.user, REFUND, action=READ, tenant_field="merchant_id")
        if merchant_id is not None:
            visible = visible.filter(merchant_id=merchant_id)
        txn = visible.filter(pk=self.kwargs["transactionId"]).first()
        if txn is None:
            raise NotFound("No payment transaction has this id.")
        return txn

    def list(self, request, transactionId=None):
        """The transaction's refunds, newest first."""
        txn = self._transaction()
        page = self.paginate_queryset(self.get_queryset().filter(transaction_id=txn.id))
        return self.get_paginated_response(RefundSerializer(page, many=True).data)

    @extend_schema(
        request=RefundCreateSerializer,
        responses={201: RefundSerializer, **REFUND_ERRORS},
        parameters=[idempotency.HEADER],
    )
    def create(self, request, transactionId=None):
        """Refund (part of) a SETTLED or PARTIALLY_REFUNDED transaction through the provider of the
        attempt that collected it. The answer carries the refund as it is once the provider answered:
        SUCCEEDED or FAILED when it answered at once, PENDING while it works (a signed callback or the
        resolver settles it) or, for a SYSTEM (cash) refund, until `actions/confirm` or `actions/fail`.
        A platform service names the transaction's `merchantId`; a user refunds its merchant's MANUAL
        transactions. An `Idempotency-Key` header replays the first answer for the same key and body."""
        data = dict(self.validated(RefundCreateSerializer))
        merchant_id = data.pop("merchant_id", None)
        if is_service(request) and merchant_id is None:
            raise serializers.ValidationError({"merchantId": "A platform service names the transaction's merchant."})
        txn = self._transaction(merchant_id)
        self.authorize(CREATE, domain=txn.merchant_id)
        return self.idempotent(
            f"refunds.create:{txn.merchant_id}:{txn.id}",  # a key is the caller's for one transaction
            write=lambda: self._refund(request, txn, data),
            answer=lambda refund_id: RefundSerializer(self.queryset.get(pk=refund_id)).data,
        )

    def _refund(self, request, txn: PaymentTransaction, data: dict) -> Created:
        refund = services.refund_create(transaction_id=txn.id, requested_by=user_id_of(request), by_service=is_service(request), **data)
        # The provider is asked once the refund (and the request's key) committed.
        return Created(refund.id, status.HTTP_201_CREATED, then=lambda: services.refund_send(refund_id=refund.id))


REFUND_TRANSITION = OpenApiResponse(
    description="REFUND_INVALID_TRANSITION (the refund is not PENDING), REFUND_NOT_MANUAL (a provider's refund: the provider answers)."
)


class RefundViewSet(ServiceViewSet):
    """Refunds of the caller's merchants (filters `transactionId`, `status`, `createdAfter`,
    `createdBefore`, `merchantId`); a SYSTEM (cash) refund is confirmed or failed by the caller."""

    policy_resource = REFUND
    policy_tenant_field = "merchant_id"
    serializer_class = RefundSerializer
    filterset_class = RefundFilter
    queryset = Refund.objects.select_related("transaction")

    @extend_schema(request=RefundConfirmSerializer, responses={200: RefundSerializer, 409: REFUND_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/confirm")
    def confirm(self, request, pk=None):
        """The cash of a SYSTEM refund was handed back: SUCCEEDED."""
        data = self.validated(RefundConfirmSerializer)
        refund = services.refund_confirm(refund_id=self.get_object().id, reference=data.get("reference", ""))
        return Response(RefundSerializer(self.queryset.get(pk=refund.id)).data)

    @extend_schema(request=RefundFailSerializer, responses={200: RefundSerializer, 409: REFUND_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/fail")
    def fail(self, request, pk=None):
        """A SYSTEM refund was not paid out: FAILED (its amount may be refunded again)."""
        data = self.validated(RefundFailSerializer)
        refund = services.refund_fail(refund_id=self.get_object().id, reason=data.get("reason", ""))
        return Response(RefundSerializer(self.queryset.get(pk=refund.id)).data)


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


class RefundCallbackView(PublicView):
    """A provider's signed callback with a refund's outcome (fields prov_RefundRef, prov_TxnRef,
    prov_RefundNo, prov_Amount, prov_ResponseCode, prov_SecureHash; signed as the IPN). Always 200
    with {"RspCode", "Message"}, the IPN's codes."""

    parser_classes = (JSONParser, FormParser)

    @property
    def max_body_bytes(self) -> int:
        return settings.PAYMENT_IPN_MAX_BODY_BYTES

    def handle_exception(self, exc):
        if getattr(exc, "status_code", 500) in (400, 415):
            return Response({"RspCode": services.OTHER, "Message": services.REPLY_MESSAGES[services.OTHER]})
        return super().handle_exception(exc)

    @extend_schema(request=inline_serializer("RefundCallbackData", {"prov_RefundRef": serializers.CharField()}), responses={200: IPN_REPLY})
    def post(self, request):
        data = request.data
        fields = {key: data.get(key) for key in data} if hasattr(data, "getlist") else data
        code = services.refund_callback(fields=fields)
        return Response({"RspCode": code, "Message": services.REPLY_MESSAGES[code]})
