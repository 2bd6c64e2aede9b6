"""The product's routes plus bench-only ones under /bench/ (this module is never the product's
ROOT_URLCONF: only benchmarks.platform_settings points here)."""

from django.urls import path

from benchmarks.platform_views import InquiryRowView
from merchant_platform.urls import handler400, handler403, handler404, handler500
from merchant_platform.urls import urlpatterns as platform_urlpatterns

__all__ = ("handler400", "handler403", "handler404", "handler500", "urlpatterns")

urlpatterns = [path("bench/inquiries/<int:pk>", InquiryRowView.as_view(), name="bench-inquiry"), *platform_urlpatterns]
