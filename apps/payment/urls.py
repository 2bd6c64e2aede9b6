"""Routes of the service, relative to its prefix (/v1/api/payment). A WORKER process (spec 1.4)
serves no REST: only the probes the kernel adds."""

from django.conf import settings
from rest_framework.routers import SimpleRouter

from apps.payment.views import AttemptViewSet, DeliveryViewSet, RefundViewSet, TransactionRefundViewSet, TransactionViewSet, WebhookViewSet

router = SimpleRouter(trailing_slash=False)
router.register("transactions", TransactionViewSet, basename="payment-transaction")
router.register(r"transactions/(?P<transactionId>[0-9]+)/refunds", TransactionRefundViewSet, basename="payment-transaction-refund")
router.register("refunds", RefundViewSet, basename="payment-refund")
router.register("attempts", AttemptViewSet, basename="payment-attempt")
router.register("webhooks", WebhookViewSet, basename="payment-webhook")
router.register("webhook-deliveries", DeliveryViewSet, basename="payment-webhook-delivery")

urlpatterns = [] if settings.PAYMENT_MODE == "WORKER" else router.urls
