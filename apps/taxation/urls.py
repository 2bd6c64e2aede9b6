"""Routes of the service, relative to its prefix (/v1/api/taxation)."""

from rest_framework.routers import SimpleRouter

from apps.taxation import views

router = SimpleRouter(trailing_slash=False)
router.register("tax-groups", views.TaxGroupViewSet, basename="taxation-tax-group")
router.register("tax-sets", views.TaxSetViewSet, basename="taxation-tax-set")
router.register("tax-provisioning", views.TaxProvisioningViewSet, basename="taxation-provisioning")
router.register("rounding-policies", views.RoundingPolicyViewSet, basename="taxation-rounding-policy")
router.register("quotes", views.QuoteViewSet, basename="taxation-quote")

urlpatterns = router.urls
