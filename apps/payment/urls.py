"""Routes of the service, relative to its prefix (/v1/api/payment)."""

from rest_framework.routers import SimpleRouter

from apps.payment.views import AttemptViewSet, TransactionViewSet

router = SimpleRouter(trailing_slash=False)
router.register("transactions", TransactionViewSet, basename="payment-transaction")
router.register("attempts", AttemptViewSet, basename="payment-attempt")

urlpatterns = router.urls
