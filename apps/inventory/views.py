"""HTTP of inventory: each view translates a request into a service call and back.

Operator routes require a user token (or HTTP Basic for platform services) and go through the
policy layer; every record belongs to its merchant (`merchant_id`): another merchant's record
answers 404. The reservation routes under /internal are for commerce only (HTTP Basic, spec 5).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.inventory import selectors, services
from apps.inventory.filters import ItemFilter, LocationFilter, PurchaseOrderFilter, StockFilter, TicketFilter, TrackingFilter
from apps.inventory.models import IdempotencyKey, Item, Location, PurchaseOrder, Reservation, Ticket, Tracking
from apps.inventory.serializers import (
    AdjustmentSerializer,
    CommitSerializer,
    ItemSerializer,
    ItemUpdateSerializer,
    LocationCreateSerializer,
    LocationSerializer,
    LocationUpdateSerializer,
    PurchaseOrderCreateSerializer,
    PurchaseOrderSerializer,
    ReceiveSerializer,
    ReleaseSerializer,
    ReservationSerializer,
    ReserveSerializer,
    StockSerializer,
    TicketCountSerializer,
    TicketCreateSerializer,
    TicketSerializer,
    TrackingSerializer,
)
from merchant_platform import idempotency
from merchant_platform.authentication_classes import ServiceBasicAuthentication
from merchant_platform.errors import InvalidInput, NotFound
from merchant_platform.idempotency import Created, IdempotentCreateMixin
from merchant_platform.parsers import JSONParser
from merchant_platform.policy import CREATE, IsServicePrincipal, scope_queryset
from merchant_platform.views import ServiceViewSet, ValidatingMixin, user_id_of

LOCATION, ITEM, STOCK, TRACKING = "inventory.Location", "inventory.Item", "inventory.Stock", "inventory.Tracking"
TICKET, PURCHASE_ORDER = "inventory.Ticket", "inventory.PurchaseOrder"
ILLEGAL = OpenApiResponse(description="ILLEGAL_TRANSITION: the record's status does not allow this.")
INSUFFICIENT = OpenApiResponse(description="INSUFFICIENT_STOCK: not enough available stock.")


def visible_item(request, item_id: int) -> Item:
    """An item the caller may read, else the 404 a missing one gets."""
    item = scope_queryset(Item.objects.all(), request.user, ITEM, tenant_field="merchant_id").filter(pk=item_id).first()
    if item is None:
        raise NotFound("No item has this id.")
    return item


class LocationViewSet(ServiceViewSet):
    """Lists filter and order; a record route needs none of the filters' cost."""

    policy_resource = LOCATION
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    serializer_class = LocationSerializer
    filterset_class = LocationFilter
    queryset = Location.objects.all()

    @extend_schema(request=LocationCreateSerializer, responses={201: LocationSerializer})
    def create(self, request):
        data = self.validated(LocationCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        location = services.location_create(**data, created_by=user_id_of(request))
        return Response(LocationSerializer(location).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=LocationUpdateSerializer, responses={200: LocationSerializer})
    def partial_update(self, request, pk=None):
        location = self.get_object()
        data = self.validated(LocationUpdateSerializer, record=location)
        return Response(LocationSerializer(services.location_update(location_id=location.id, **data)).data)

    @extend_schema(responses={204: None, 409: OpenApiResponse(description="LOCATION_NOT_EMPTY: it still holds stock.")})
    def destroy(self, request, pk=None):
        services.location_delete(location_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ItemViewSet(ServiceViewSet):
    """Items come from commerce's variants (PRODUCT_VARIANT stream); only allowOversell is set here."""

    policy_resource = ITEM
    policy_tenant_field = "merchant_id"
    serializer_class = ItemSerializer
    filterset_class = ItemFilter
    queryset = Item.objects.all()

    @extend_schema(request=ItemUpdateSerializer, responses={200: ItemSerializer})
    def partial_update(self, request, pk=None):
        item = self.get_object()
        data = self.validated(ItemUpdateSerializer, record=item)
        return Response(ItemSerializer(services.item_update(item_id=item.id, **data)).data)


class StockViewSet(IdempotentCreateMixin, ServiceViewSet):
    """Stock per item and location (InventoryStock): filter by inventoryItemId, locationId or
    merchantId for the reads per item, per location and per merchant."""

    policy_resource = STOCK
    policy_tenant_field = "merchant_id"
    idempotency_keys, idempotency_using = IdempotencyKey, services.DB
    policy_actions = {"adjust": "adjust"}
    serializer_class = StockSerializer
    filterset_class = StockFilter
    queryset = selectors.stocks()

    @extend_schema(
        request=AdjustmentSerializer, parameters=[idempotency.HEADER], responses={201: TrackingSerializer, **idempotency.RESPONSES}
    )
    @action(detail=False, methods=["post"], url_path="adjustments")
    def adjust(self, request):
        """A manual adjustment of on hand with a reason (409 INSUFFICIENT_STOCK): answers the
        tracking row it wrote."""
        data = self.validated(AdjustmentSerializer)
        item = visible_item(request, data["item_id"])
        self.authorize("adjust", domain=item.merchant_id)
        return self.idempotent(
            "stock.adjust",
            write=lambda: Created(services.stock_adjust(**data, created_by=user_id_of(request)).id),
            answer=lambda row_id: TrackingSerializer(Tracking.objects.get(pk=row_id)).data,
        )


class TrackingViewSet(ServiceViewSet):
    """Every stock change (InventoryTracking), read-only: rows are immutable."""

    policy_resource = TRACKING
    policy_tenant_field = "merchant_id"
    serializer_class = TrackingSerializer
    filterset_class = TrackingFilter
    queryset = Tracking.objects.all()


class TicketViewSet(ServiceViewSet):
    """Cycle counts (InventoryTicket type CYCLE_COUNT): OPEN -> COUNTED -> APPLIED, or CANCELLED."""

    policy_resource = TICKET
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    policy_actions = {"count": "update", "apply": "update", "cancel": "update"}
    serializer_class = TicketSerializer
    filterset_class = TicketFilter
    queryset = Ticket.objects.all()

    @extend_schema(request=TicketCreateSerializer, responses={201: TicketSerializer})
    def create(self, request):
        data = self.validated(TicketCreateSerializer)
        data.pop("type", None)
        item = visible_item(request, data["item_id"])
        self.authorize_placement(CREATE, domain=item.merchant_id)
        ticket = services.ticket_create(**data, created_by=user_id_of(request))
        return Response(TicketSerializer(ticket).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TicketCountSerializer, responses={200: TicketSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"])
    def count(self, request, pk=None):
        ticket = self.get_object()
        data = self.validated(TicketCountSerializer)
        return Response(TicketSerializer(services.ticket_count(ticket_id=ticket.id, **data)).data)

    @extend_schema(request=None, responses={200: TicketSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"])
    def apply(self, request, pk=None):
        ticket = self.get_object()
        return Response(TicketSerializer(services.ticket_apply(ticket_id=ticket.id, created_by=user_id_of(request))).data)

    @extend_schema(request=None, responses={200: TicketSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        ticket = self.get_object()
        return Response(TicketSerializer(services.ticket_cancel(ticket_id=ticket.id)).data)


class PurchaseOrderViewSet(IdempotentCreateMixin, ServiceViewSet):
    """Purchase orders: DRAFT -> ORDERED -> PARTIALLY_RECEIVED -> RECEIVED, or CANCELLED."""

    policy_resource = PURCHASE_ORDER
    policy_tenant_field = "merchant_id"
    idempotency_keys, idempotency_using = IdempotencyKey, services.DB
    policy_owner_field = "created_by"
    policy_actions = {"place": "update", "cancel": "update", "receive": "receive"}
    serializer_class = PurchaseOrderSerializer
    filterset_class = PurchaseOrderFilter
    queryset = PurchaseOrder.objects.prefetch_related("lines")

    @staticmethod
    def _body_of(order_id: int) -> dict:
        return PurchaseOrderSerializer(PurchaseOrder.objects.prefetch_related("lines").get(pk=order_id)).data

    def _answer(self, order_id: int) -> Response:
        return Response(self._body_of(order_id))

    @extend_schema(
        request=PurchaseOrderCreateSerializer,
        parameters=[idempotency.HEADER],
        responses={201: PurchaseOrderSerializer, **idempotency.RESPONSES},
    )
    def create(self, request):
        return self.create_idempotently(
            PurchaseOrderCreateSerializer,
            operation="purchase-orders.create",
            write=lambda data: Created(services.purchase_order_create(**data, created_by=user_id_of(request)).id),
            answer=self._body_of,
        )

    @extend_schema(request=None, responses={200: PurchaseOrderSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"], url_path="order")
    def place(self, request, pk=None):
        """DRAFT -> ORDERED."""
        return self._answer(services.purchase_order_place(purchase_order_id=self.get_object().id).id)

    @extend_schema(request=None, responses={200: PurchaseOrderSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        return self._answer(services.purchase_order_cancel(purchase_order_id=self.get_object().id).id)

    @extend_schema(request=ReceiveSerializer, responses={200: PurchaseOrderSerializer, 409: ILLEGAL})
    @action(detail=True, methods=["post"])
    def receive(self, request, pk=None):
        """Receive goods once per receiptId; publishes purchase-order.received after the commit."""
        order = self.get_object()
        data = self.validated(ReceiveSerializer)
        order = services.purchase_order_receive(purchase_order_id=order.id, **data, created_by=user_id_of(request))
        return self._answer(order.id)


class ReservationViewSet(ValidatingMixin, viewsets.GenericViewSet):
    """Commerce's internal reservation API (HTTP Basic, spec 5): reserve a sale order's lines (all
    or nothing), release them, commit them (deduct now). Idempotent by order id and line id."""

    authentication_classes = (ServiceBasicAuthentication,)
    permission_classes = (IsServicePrincipal,)
    parser_classes = (JSONParser,)
    serializer_class = ReservationSerializer
    queryset = Reservation.objects.all()

    @extend_schema(request=ReserveSerializer, responses={201: ReservationSerializer(many=True), 409: INSUFFICIENT})
    def create(self, request):
        reservations = services.reservation_reserve(**self.validated(ReserveSerializer))
        return Response(ReservationSerializer(reservations, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("orderId", str, required=True, description="The sale order id."),
            OpenApiParameter("merchantId", str, description="The order's merchant (order ids are per merchant)."),
        ],
        responses={200: ReservationSerializer(many=True)},
    )
    def list(self, request):
        """The reservations of one order (`orderId`, required; `merchantId` to name its merchant)."""
        order_id = request.query_params.get("orderId", "")
        if not order_id:
            raise InvalidInput({"orderId": "Give the order id."})
        reservations = Reservation.objects.filter(order_id=order_id)
        merchant_id = request.query_params.get("merchantId")
        if merchant_id is not None:
            if not (merchant_id.isascii() and merchant_id.isdigit() and int(merchant_id) < 2**63):
                raise InvalidInput({"merchantId": "Give the merchant id (digits)."})
            reservations = reservations.filter(merchant_id=int(merchant_id))
        return Response(ReservationSerializer(reservations, many=True).data)

    @extend_schema(request=ReleaseSerializer, responses={200: ReservationSerializer(many=True)})
    @action(detail=False, methods=["post"])
    def release(self, request):
        return Response(ReservationSerializer(services.reservation_release(**self.validated(ReleaseSerializer)), many=True).data)

    @extend_schema(request=CommitSerializer, responses={200: TrackingSerializer(many=True)})
    @action(detail=False, methods=["post"])
    def commit(self, request):
        """Deduct the reserved lines now; payment.success for the same order then changes nothing."""
        return Response(TrackingSerializer(services.reservation_commit(**self.validated(CommitSerializer)), many=True).data)
