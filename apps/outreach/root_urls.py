"""Routes outside the service prefix: GET /metrics (spec 4.1), for a scraper reaching the process
directly; the gateway routes only the prefix, so it never exposes this page."""

from django.urls import path

from apps.outreach import views

urlpatterns = [path("metrics", views.metrics_view, name="outreach-metrics")]
