"""The platform's routes plus test-only views under /kernel-test/ (tests select it with
@override_settings(ROOT_URLCONF="tests.kernel.urls"))."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from merchant_platform.urls import handler400, handler403, handler404, handler500
from merchant_platform.urls import urlpatterns as platform_urlpatterns
from tests.kernel.sample import views

router = SimpleRouter(trailing_slash=False)
router.register("widgets", views.WidgetViewSet, basename="widget")

test_urlpatterns = [
    path("validate", views.ValidateView.as_view()),
    path("get-only", views.GetOnlyView.as_view()),
    path("service-only", views.ServiceOnlyView.as_view()),
    path("forbidden", views.ForbiddenView.as_view()),
    path("throttled", views.ThrottledView.as_view()),
    path("boom", views.BoomView.as_view()),
    path("plain-boom", views.plain_boom_view),
    path("plain-forbidden", views.plain_forbidden_view),
    path("plain-missing", views.plain_missing_view),
    path("plain-suspicious", views.plain_suspicious_view),
    path("plain-body-length", views.plain_body_length_view),
    path("decrypt", views.DecryptView.as_view()),
    path("forward", views.ForwardView.as_view()),
    *router.urls,
]

urlpatterns = [path("kernel-test/", include(test_urlpatterns)), *platform_urlpatterns]

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
