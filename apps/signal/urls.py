"""Routes of the service, relative to its prefix /v1/api/signal."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.signal import views

router = SimpleRouter(trailing_slash=False)
router.register("notifications", views.NotificationViewSet, basename="signal-notification")

urlpatterns = [
    path("socket/websocket/clients/status", views.ClientsStatusView.as_view(), name="signal-clients-status"),
    path("socket/websocket/clients", views.ClientsView.as_view(), name="signal-clients"),
    *router.urls,
]
