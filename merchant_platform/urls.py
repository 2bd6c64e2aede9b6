"""Routes of this process: every active service under its prefix, plus process-wide probes and
the metrics page.

In split mode (APP_SERVICE=<name>) only that service is active; in all-in-one mode all ten are, and
the Django admin is mounted at /admin/.
"""

from __future__ import annotations

from importlib import import_module

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from merchant_platform.metrics import metrics_view
from merchant_platform.openapi import service_doc_urls
from merchant_platform.probes import healthz_view, readyz_view_for
from merchant_platform.registry import active_services

handler400 = "merchant_platform.errors.bad_request_view"
handler403 = "merchant_platform.errors.permission_denied_view"
handler404 = "merchant_platform.errors.not_found_view"
handler500 = "merchant_platform.errors.server_error_view"


def _service_routes(service) -> list:
    service_urls = import_module(f"{service.module}.urls")
    probes = [
        path("healthz", healthz_view, name=f"{service.name}-healthz"),
        path("readyz", readyz_view_for((service,)), name=f"{service.name}-readyz"),
    ]
    if service.name == "signal":  # spec 4.1: signal's live check is GET /v1/api/signal/health
        probes.append(path("health", healthz_view, name="signal-health"))
    docs = service_doc_urls(service, service_urls) if service.openapi else []
    routes = [path(service.prefix.lstrip("/") + "/", include(probes + docs + [path("", include(service_urls))]))]
    if service.root_urlconf:
        routes.append(path("", include(service.root_urlconf)))
    return routes


urlpatterns = [
    path("healthz", healthz_view, name="healthz"),
    path("readyz", readyz_view_for(None), name="readyz"),
    path("metrics", metrics_view, name="metrics"),
]
for _service in active_services():
    urlpatterns += _service_routes(_service)
if settings.ADMIN_ENABLED:
    urlpatterns.append(path("admin/", admin.site.urls))
