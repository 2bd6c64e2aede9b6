"""Routes of the service, relative to its prefix (/v1/api/licensing)."""

from rest_framework.routers import SimpleRouter

from apps.licensing.views import ActivationViewSet, LicenseViewSet, PolicyViewSet

router = SimpleRouter(trailing_slash=False)
router.register("licenses", LicenseViewSet, basename="licensing-license")
router.register("activations", ActivationViewSet, basename="licensing-activation")
router.register("policies", PolicyViewSet, basename="licensing-policy")

urlpatterns = router.urls
