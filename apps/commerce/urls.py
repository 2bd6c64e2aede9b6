"""Routes of the service, relative to its prefix (/v1/api/commerce)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.commerce.sales.views import PaymentWebhookView, SaleOrderViewSet
from apps.commerce.views import IntegrationViewSet, MediaViewSet, MerchantViewSet, ProductViewSet, VariantViewSet

router = SimpleRouter(trailing_slash=False)
router.register("merchants", MerchantViewSet, basename="commerce-merchant")
router.register("products", ProductViewSet, basename="commerce-product")
router.register("variants", VariantViewSet, basename="commerce-variant")
router.register("media", MediaViewSet, basename="commerce-media")
router.register("integrations", IntegrationViewSet, basename="commerce-integration")
router.register("sale-orders", SaleOrderViewSet, basename="commerce-sale-order")

urlpatterns = [
    *router.urls,
    path("payment-webhooks/<int:merchant_id>", PaymentWebhookView.as_view(), name="commerce-payment-webhook"),
]
