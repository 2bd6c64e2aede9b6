"""The platform's routes plus the policy test views under /policy-test/."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from merchant_platform.urls import handler400, handler403, handler404, handler500
from merchant_platform.urls import urlpatterns as platform_urlpatterns
from tests.identity import policy_views

router = SimpleRouter(trailing_slash=False)
router.register("widgets", policy_views.TenantWidgetViewSet, basename="policy-widget")
router.register("gadgets", policy_views.OwnWidgetViewSet, basename="policy-gadget")

test_urlpatterns = [
    path("whoami", policy_views.WhoAmIView.as_view()),
    path("internal", policy_views.InternalView.as_view()),
    *router.urls,
]

urlpatterns = [path("policy-test/", include(test_urlpatterns)), *platform_urlpatterns]

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
