"""HTTP of the outreach service: translate requests to service and selector calls and back.

Public endpoints (no authentication, spec 4.5) accept at most PUBLIC_MAX_BODY_BYTES and do a bounded
amount of work; rate limiting belongs to the gateway (spec 8, docs/services/outreach.md).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.outreach import selectors, services
from apps.outreach.filters import InquiryFilter, SubscriberFilter
from apps.outreach.models import Inquiry, Subscriber
from apps.outreach.serializers import (
    AcknowledgementSerializer,
    ConfirmSerializer,
    InquiryReceiptSerializer,
    InquirySerializer,
    InquirySubmitSerializer,
    StatisticsQuerySerializer,
    StatisticsSerializer,
    SubscriberCreateSerializer,
    SubscriberSerializer,
    SubscriberUpdateSerializer,
    SubscribeSerializer,
    UnsubscribeSerializer,
    inquiry_receipt,
)
from merchant_platform.authentication_classes import JWTAuthentication
from merchant_platform.parsers import JSONParser
from merchant_platform.policy import scope_queryset
from merchant_platform.views import OperatorViewSet, PublicView, ValidatingMixin

PUBLIC_MAX_BODY_BYTES = 16 * 1024

SUBSCRIBE_ACK = "If this address can be subscribed, a message with a link is on its way to it."
CONFIRM_ACK = "If the link was valid, the subscription is confirmed."
UNSUBSCRIBE_ACK = "If the link was valid, the address will receive no more newsletters."


class OutreachPublicView(PublicView):
    max_body_bytes = PUBLIC_MAX_BODY_BYTES


@extend_schema(tags=["public"], request=InquirySubmitSerializer, responses={201: InquiryReceiptSerializer})
class InquirySubmitView(OutreachPublicView):
    """Send an inquiry (public). Observation rooms are notified once it is stored."""

    def post(self, request):
        inquiry = services.inquiry_submit(**self.validated(InquirySubmitSerializer))
        return Response(inquiry_receipt(inquiry), status=status.HTTP_201_CREATED)


@extend_schema(tags=["public"], request=SubscribeSerializer, responses={202: AcknowledgementSerializer})
class SubscribeView(OutreachPublicView):
    """Subscribe an address (public). The answer is the same whether or not it was known."""

    def post(self, request):
        services.subscriber_subscribe(**self.validated(SubscribeSerializer))
        return Response({"detail": SUBSCRIBE_ACK}, status=status.HTTP_202_ACCEPTED)


@extend_schema(tags=["public"], request=ConfirmSerializer, responses={200: AcknowledgementSerializer})
class ConfirmView(OutreachPublicView):
    """Confirm a subscription with the token from the confirmation mail (double opt-in)."""

    def post(self, request):
        services.subscriber_confirm(**self.validated(ConfirmSerializer))
        return Response({"detail": CONFIRM_ACK})


@extend_schema(
    tags=["public"],
    request={
        "application/json": UnsubscribeSerializer,
        "application/x-www-form-urlencoded": UnsubscribeSerializer,
        "multipart/form-data": UnsubscribeSerializer,
    },
    parameters=[OpenApiParameter("token", str, description="The token, as in the List-Unsubscribe URL (RFC 8058).")],
    responses={200: AcknowledgementSerializer},
)
class UnsubscribeView(OutreachPublicView):
    """Unsubscribe with the subscriber's token: a JSON body, or the RFC 8058 one-click POST of
    `List-Unsubscribe=One-Click` to the List-Unsubscribe URL (token in its query string)."""

    parser_classes = (JSONParser, FormParser, MultiPartParser)

    def post(self, request):
        data = request.data.dict() if hasattr(request.data, "dict") else request.data
        services.subscriber_unsubscribe(
            **self.validated(UnsubscribeSerializer, data, context={"query_token": request.query_params.get("token")})
        )
        return Response({"detail": UNSUBSCRIBE_ACK})


# --- Operators (JWT + the policy layer, docs/authentication.md) -----------------------------------
#
# Inquiries are scoped by the merchant they concern: staff holding `outreach.Inquiry.<action>` in a
# merchant see that merchant's inquiries; inquiries about no merchant are for platform-wide grants
# (ADMIN, SUPER_ADMIN). Subscribers form one platform-wide list: platform-wide grants only.

INQUIRY_RESOURCE = "outreach.Inquiry"
SUBSCRIBER_RESOURCE = "outreach.Subscriber"


@extend_schema_view(
    partial_update=extend_schema(
        description="Set `status` to CANCELLED to mark the inquiry as spam.",
        responses={
            200: InquirySerializer,
            409: OpenApiResponse(description="INQUIRY_TRANSITION_NOT_ALLOWED: a cancelled inquiry stays cancelled."),
        },
    ),
    destroy=extend_schema(description="Soft delete: the inquiry disappears from the API but stays in the database."),
)
class InquiryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin, OperatorViewSet):
    """Operators read inquiries, mark spam and delete (softly). Creation is the public submit."""

    policy_resource = INQUIRY_RESOURCE
    policy_tenant_field = "merchant_id"
    queryset = Inquiry.objects.all()
    serializer_class = InquirySerializer
    filterset_class = InquiryFilter
    http_method_names = ("get", "patch", "delete", "head", "options")

    def perform_update(self, serializer):
        serializer.instance = services.inquiry_update(inquiry_id=serializer.instance.id, **serializer.validated_data)

    def perform_destroy(self, instance):
        services.inquiry_delete(inquiry_id=instance.id)


@extend_schema_view(
    create=extend_schema(
        request=SubscriberCreateSerializer,
        responses={201: SubscriberSerializer, 409: OpenApiResponse(description="SUBSCRIBER_EXISTS: the address is a subscriber.")},
    ),
    partial_update=extend_schema(
        request=SubscriberUpdateSerializer,
        responses={
            200: SubscriberSerializer,
            409: OpenApiResponse(
                description="SUBSCRIBER_TRANSITION_NOT_ALLOWED: operators may only unsubscribe; the address owner subscribes again."
            ),
        },
    ),
    destroy=extend_schema(description="Soft delete: the address may subscribe again."),
)
class SubscriberViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    OperatorViewSet,
):
    """Operators list, add, rename, unsubscribe and delete (softly) subscribers."""

    policy_resource = SUBSCRIBER_RESOURCE
    queryset = Subscriber.objects.all()
    filterset_class = SubscriberFilter
    http_method_names = ("get", "post", "patch", "delete", "head", "options")

    def get_serializer_class(self):
        return {"create": SubscriberCreateSerializer, "partial_update": SubscriberUpdateSerializer}.get(self.action, SubscriberSerializer)

    def perform_create(self, serializer):
        self.policy_create_kwargs(serializer.validated_data)
        serializer.instance = services.subscriber_create(**serializer.validated_data, created_by=self.request.user.id)

    def perform_update(self, serializer):
        serializer.instance = services.subscriber_update(subscriber_id=serializer.instance.id, **serializer.validated_data)

    def perform_destroy(self, instance):
        services.subscriber_delete(subscriber_id=instance.id)


@extend_schema(parameters=[StatisticsQuerySerializer], responses={200: StatisticsSerializer})
class StatisticsView(ValidatingMixin, APIView):
    """Inquiries by status and by day over a date range (at most 366 days), subscribers by status;
    computed over what the caller may read, so a merchant's staff see their merchant's figures."""

    authentication_classes = (JWTAuthentication,)
    permission_classes = (IsAuthenticated,)

    def get(self, request):
        query = self.validated(StatisticsQuerySerializer, request.query_params.dict())
        figures = selectors.outreach_statistics(
            inquiries=scope_queryset(Inquiry.objects.all(), request.user, INQUIRY_RESOURCE, tenant_field="merchant_id"),
            subscribers=scope_queryset(Subscriber.objects.all(), request.user, SUBSCRIBER_RESOURCE),
            **query,
        )
        return Response(StatisticsSerializer(figures).data)
