"""Routes of the service, relative to its prefix (/v1/api/commerce)."""

from rest_framework.routers import SimpleRouter

from apps.commerce.views import MerchantViewSet, ProductViewSet, VariantViewSet

router = SimpleRouter(trailing_slash=False)
router.register("merchants", MerchantViewSet, basename="commerce-merchant")
router.register("products", ProductViewSet, basename="commerce-product")
router.register("variants", VariantViewSet, basename="commerce-variant")

urlpatterns = router.urls
