"""Routes of the service, relative to its prefix (/v1/api/payment)."""

from rest_framework.routers import SimpleRouter

from apps.payment.views import AttemptViewSet, DeliveryViewSet, TransactionViewSet, WebhookViewSet

router = SimpleRouter(trailing_slash=False)
router.register("transactions", TransactionViewSet, basename="payment-transaction")
router.register("attempts", AttemptViewSet, basename="payment-attempt")
router.register("webhooks", WebhookViewSet, basename="payment-webhook")
router.register("webhook-deliveries", DeliveryViewSet, basename="payment-webhook-delivery")

urlpatterns = router.urls
