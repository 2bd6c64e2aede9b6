"""Routes of the service, relative to its prefix /v1/api/signal."""

from rest_framework.routers import SimpleRouter

from apps.signal import views

router = SimpleRouter(trailing_slash=False)
router.register("notifications", views.NotificationViewSet, basename="signal-notification")

urlpatterns = [*router.urls]
