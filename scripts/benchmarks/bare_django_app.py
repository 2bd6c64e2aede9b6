"""The bare Django project's views and WSGI application (settings: bare_django.py).

`/django` is a plain Django view, `/drf` a DRF ping (no authentication, no permission), `/healthz`
the readiness check the bench polls. Served only by the bench, never by the product.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.bare_django")
application = get_wsgi_application()  # sets Django up before DRF is imported

from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from rest_framework.response import Response  # noqa: E402
from rest_framework.views import APIView  # noqa: E402


def django_view(request):
    return JsonResponse({"status": "ok"})


class PingView(APIView):
    def get(self, request):
        return Response({"status": "ok"})


urlpatterns = [
    path("healthz", django_view),
    path("django", django_view),
    path("drf", PingView.as_view()),
]
