"""HTTP of the signal service: translate requests to service calls and back.

Notifications (spec 4.8) belong to the JWT's subject: every route works on the caller's own rows
only, so another user's notification is a 404, exactly like a missing one. No policy is involved
(a user needs no permission to read what was sent to them), hence JWT plus IsAuthenticated rather
than the policy layer of OperatorViewSet.
"""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.signal import selectors, services
from apps.signal.filters import NotificationFilter
from apps.signal.models import Notification
from apps.signal.serializers import (
    ClientSerializer,
    ClientsStatusSerializer,
    MarkedSerializer,
    NotificationSerializer,
    UnreadCountSerializer,
)
from merchant_platform.authentication_classes import JWTAuthentication
from merchant_platform.policy import can
from merchant_platform.views import PublicView

# Spec 4.8: listing the connected clients needs a WebSocketClient.* permission.
CLIENT_RESOURCE = "WebSocketClient"


@extend_schema_view(
    list=extend_schema(description="The caller's notifications, newest first."),
    destroy=extend_schema(description="Soft delete: the notification disappears from the API but stays in the database."),
)
class NotificationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """The caller's notifications: list (filters unread, topic, room, since), read one, mark read,
    mark all read, the unread count, soft delete."""

    authentication_classes = (JWTAuthentication,)
    permission_classes = (IsAuthenticated,)
    filter_backends = (DjangoFilterBackend,)
    filterset_class = NotificationFilter
    serializer_class = NotificationSerializer
    lookup_value_regex = "[0-9]+"
    queryset = Notification.objects.all()

    def get_queryset(self):
        return super().get_queryset().filter(recipient_id=self.request.user.id)

    def perform_destroy(self, instance):
        services.notification_delete(notification_id=instance.id, recipient_id=self.request.user.id)

    @extend_schema(request=None, responses={200: NotificationSerializer})
    @action(detail=True, methods=["post"])
    def read(self, request, pk=None):
        """Mark one notification read (again: no change)."""
        notification = services.notification_mark_read(notification_id=self.get_object().id, recipient_id=request.user.id)
        return Response(NotificationSerializer(notification).data)

    @extend_schema(request=None, responses={200: MarkedSerializer})
    @action(detail=False, methods=["post"], url_path="read-all")
    def read_all(self, request):
        """Mark every unread notification of the caller read."""
        return Response({"marked": services.notification_mark_all_read(recipient_id=request.user.id)}, status=status.HTTP_200_OK)

    @extend_schema(responses={200: UnreadCountSerializer})
    @action(detail=False, methods=["get"], url_path="unread-count", filter_backends=())
    def unread_count(self, request):
        """How many of the caller's notifications are unread."""
        return Response({"unread": self.get_queryset().filter(read_at__isnull=True).count()})


@extend_schema(tags=["public"], responses={200: ClientsStatusSerializer, 503: ClientsStatusSerializer})
class ClientsStatusView(PublicView):
    """WebSocket readiness (public, spec 4.8): 200 when the Redis that carries room messages and
    presence answers, else 503; with the replicas that hold sockets and how many sockets."""

    def get(self, request):
        status_ = selectors.websocket_status()
        return Response(status_, status=status.HTTP_200_OK if status_["ready"] else status.HTTP_503_SERVICE_UNAVAILABLE)


@extend_schema(responses={200: ClientSerializer(many=True)})
class ClientsView(APIView):
    """The connected /stream clients of every live replica: session, replica, subject, rooms,
    connected since (never a key). Needs `WebSocketClient.list` (or `WebSocketClient.*`) granted
    everywhere: the list spans every tenant."""

    authentication_classes = (JWTAuthentication,)
    permission_classes = (IsAuthenticated,)

    def get(self, request):
        if not can(request.user, CLIENT_RESOURCE, "list"):
            raise PermissionDenied("Listing WebSocket clients needs the WebSocketClient.list permission.")
        return Response(ClientSerializer(selectors.connected_clients(), many=True).data)
