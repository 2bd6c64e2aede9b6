"""Routes of the service, relative to its prefix (/v1/api/commerce)."""

from rest_framework.routers import SimpleRouter

from apps.commerce.views import IntegrationViewSet, MediaViewSet, MerchantViewSet, ProductViewSet, VariantViewSet

router = SimpleRouter(trailing_slash=False)
router.register("merchants", MerchantViewSet, basename="commerce-merchant")
router.register("products", ProductViewSet, basename="commerce-product")
router.register("variants", VariantViewSet, basename="commerce-variant")
router.register("media", MediaViewSet, basename="commerce-media")
router.register("integrations", IntegrationViewSet, basename="commerce-integration")

urlpatterns = router.urls
