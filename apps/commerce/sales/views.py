"""HTTP of sale orders: operator routes (JWT or HTTP Basic, the policy layer, tenant `merchant_id`)
and the public endpoint payment's signed webhooks arrive at."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser
from rest_framework.response import Response

from apps.commerce.filters import SaleOrderFilter
from apps.commerce.models import IdempotencyKey
from apps.commerce.sales import selectors, services
from apps.commerce.sales.serializers import (
    SaleOrderCreateSerializer,
    SaleOrderRefundSerializer,
    SaleOrderSerializer,
    SaleOrderUpdateSerializer,
    SaleReturnSerializer,
)
from merchant_platform import idempotency
from merchant_platform.idempotency import Created, IdempotentCreateMixin
from merchant_platform.policy import CREATE
from merchant_platform.views import PublicView, ServiceViewSet, user_id_of

SALE_ORDER = "commerce.SaleOrder"
ILLEGAL = OpenApiResponse(description="ILLEGAL_TRANSITION: the order's status does not allow this.")
PLACING_FAILED = OpenApiResponse(
    description="400 AMOUNT_TOO_LARGE; 409 INSUFFICIENT_STOCK, ITEM_INACTIVE, ITEM_NOT_STOCKED, TAX_NOT_AVAILABLE, NOTHING_TO_PAY, "
    "ORDER_BUSY, SOURCE_ID_CONFLICT, PLACEMENT_CONFLICT, ILLEGAL_TRANSITION, IDEMPOTENCY_KEY_IN_PROGRESS; 502 TAXATION_ANSWER_INVALID, "
    "INVENTORY_ANSWER_INVALID, PAYMENT_ANSWER_INVALID; 503 INVENTORY_UNAVAILABLE, TAXATION_UNAVAILABLE, PAYMENT_UNAVAILABLE. "
    "Whatever the failure, nothing stays held: the order is still DRAFT."
)
REFUND_REFUSED = OpenApiResponse(
    description="400 REFUND_LINE_UNKNOWN, REFUND_LINE_QUANTITY_EXCEEDED (more than the line sold; with `field` and `refundable`), "
    "VALIDATION_ERROR (a locationId not the merchant's); 409 REFUND_EXCEEDS_REFUNDABLE (more than earlier returns left, or the "
    "order is REFUNDED; with `field` and `refundable`), ILLEGAL_TRANSITION (not PAID, FULFILLED or PARTIALLY_REFUNDED), NOTHING_TO_REFUND, "
    "IDEMPOTENCY_KEY_IN_PROGRESS; 503 when inventory cannot check a locationId. Nothing is recorded."
)


class SaleOrderViewSet(IdempotentCreateMixin, ServiceViewSet):
    policy_resource = SALE_ORDER
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    policy_actions = {"place": "place", "cancel": "cancel", "fulfill": "fulfill", "refund": "refund"}
    serializer_class = SaleOrderSerializer
    filterset_class = SaleOrderFilter
    queryset = selectors.orders()
    idempotency_keys, idempotency_using = IdempotencyKey, services.DB

    def _answer(self, order_id: int):
        return SaleOrderSerializer(selectors.orders().get(pk=order_id)).data

    @extend_schema(
        request=SaleOrderCreateSerializer, parameters=[idempotency.HEADER], responses={201: SaleOrderSerializer, **idempotency.RESPONSES}
    )
    def create(self, request):
        """A DRAFT order, its lines priced from the catalog now."""
        data = self.validated(SaleOrderCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        services.finance_account_check(data["merchant_id"], data.get("finance_account_id"))
        return self.idempotent(
            "sale-orders.create",
            write=lambda: Created(services.order_create(**data, created_by=user_id_of(request)).id),
            answer=self._answer,
        )

    @extend_schema(request=SaleOrderUpdateSerializer, responses={200: SaleOrderSerializer, 409: ILLEGAL})
    def partial_update(self, request, pk=None):
        order = self.get_object()
        data = self.validated(SaleOrderUpdateSerializer, record=order)
        services.finance_account_check(order.merchant_id, data.get("finance_account_id"))
        return Response(self._answer(services.order_update(order_id=order.id, **data).id))

    @extend_schema(request=None, parameters=[idempotency.HEADER], responses={200: SaleOrderSerializer, 409: PLACING_FAILED})
    @action(detail=True, methods=["post"], url_path="actions/place")
    def place(self, request, pk=None):
        """DRAFT -> PLACED: reserve the stock, quote the tax, open the payment transaction (its QR
        payload is in `payment.attempts`). Placing a placed order answers it as it is."""
        order = self.get_object()
        return self.idempotent(
            f"sale-orders.place:{order.id}",
            write=lambda: Created(services.order_place(order_id=order.id).id, status.HTTP_200_OK),
            answer=self._answer,
            atomic=False,  # a saga over three services, idempotent by itself
        )

    @extend_schema(request=None, responses={200: SaleOrderSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"], url_path="actions/cancel")
    def cancel(self, request, pk=None):
        """DRAFT or PLACED -> CANCELLED (the payment is cancelled and the stock released)."""
        return Response(self._answer(services.order_cancel(order_id=self.get_object().id).id))

    @extend_schema(request=None, responses={200: SaleOrderSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"], url_path="actions/fulfill")
    def fulfill(self, request, pk=None):
        """PAID -> FULFILLED; a PARTIALLY_REFUNDED order not yet handed over gets its fulfilledAt."""
        return Response(self._answer(services.order_fulfill(order_id=self.get_object().id).id))

    @extend_schema(
        request=SaleOrderRefundSerializer,
        parameters=[idempotency.HEADER],
        responses={201: SaleReturnSerializer, 400: REFUND_REFUSED, 409: REFUND_REFUSED, 422: idempotency.RESPONSES[422]},
    )
    @action(detail=True, methods=["post"], url_path="actions/refund")
    def refund(self, request, pk=None):
        """Give back units of a PAID, FULFILLED or PARTIALLY_REFUNDED order: a return is recorded
        (its amounts from the order's own lines) and its refund asked of payment. 201 with the
        return: SUCCEEDED or FAILED (`failureReason`: payment's code) when payment answered at once,
        else PENDING until payment tells the outcome. The order becomes PARTIALLY_REFUNDED or
        REFUNDED when the refund succeeds."""
        order = self.get_object()
        data = self.validated(SaleOrderRefundSerializer)
        services.refund_locations_check(order.merchant_id, data["lines"])
        return self.idempotent(
            f"sale-orders.refund:{order.id}",
            write=lambda: Created(services.order_refund(order_id=order.id, **data, requested_by=user_id_of(request)).id),
            answer=lambda return_id: SaleReturnSerializer(selectors.sale_returns().get(pk=return_id)).data,
        )


class RawBodyParser(BaseParser):
    """The bytes as sent: the signature covers them exactly."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read()


class PaymentWebhookView(PublicView):
    """Payment's webhooks for one merchant's sale orders (Standard Webhooks signature, checked
    against the subscription's secret; each `webhook-id` is acted on once)."""

    parser_classes = (RawBodyParser,)
    max_body_bytes = 256 * 1024

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={
            200: inline_serializer(
                "WebhookOutcome",
                {
                    "outcome": serializers.CharField(
                        help_text="paid, cancelled, expired, refunded, refund_failed, duplicate, ignored or unmatched "
                        "(recorded, not applied)"
                    )
                },
            ),
            401: OpenApiResponse(description="WEBHOOK_SIGNATURE_INVALID"),
            409: OpenApiResponse(description="REFUND_NOT_YET_RECORDED: the refund's return is still being recorded; deliver it again."),
            404: OpenApiResponse(description="No subscription for this merchant."),
        },
    )
    def post(self, request, merchant_id: str):
        body = request.data
        payload = services.webhook_verify(merchant_id=int(merchant_id), body=body, headers=dict(request.headers))
        outcome = services.webhook_apply(merchant_id=int(merchant_id), message_id=request.headers["webhook-id"], payload=payload)
        return Response({"outcome": outcome})
