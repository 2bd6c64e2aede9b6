"""Test-only views that exercise the kernel through HTTP: errors, auth, throttling, soft delete,
outgoing calls. Routed only by tests.kernel.urls."""

from __future__ import annotations

import uuid

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, JsonResponse
from rest_framework import permissions, serializers, throttling, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from merchant_platform import crypto, http
from merchant_platform.authentication_classes import ServiceBasicAuthentication
from merchant_platform.serializers import BaseModelSerializer
from tests.kernel.sample.models import Widget

# Throttle counters live in the shared Redis cache: a per-run key keeps earlier runs out of the count.
THROTTLE_RUN = uuid.uuid4().hex


class OpenView(APIView):
    authentication_classes = ()
    permission_classes = (permissions.AllowAny,)


class OrderSerializer(serializers.Serializer):
    email = serializers.EmailField()
    quantity = serializers.IntegerField(min_value=1)
    lines = serializers.ListField(child=serializers.DictField(), required=False)


class ValidateView(OpenView):
    def post(self, request):
        serializer = OrderSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data)


class GetOnlyView(OpenView):
    def get(self, request):
        return Response({"ok": True})


class ServiceOnlyView(APIView):
    authentication_classes = (ServiceBasicAuthentication,)
    permission_classes = (permissions.IsAuthenticated,)

    def get(self, request):
        return Response({"caller": request.user.username})


class DenyAll(permissions.BasePermission):
    message = "Nobody may read this."

    def has_permission(self, request, view):
        return False


class ForbiddenView(OpenView):
    permission_classes = (DenyAll,)

    def get(self, request):
        return Response({"never": True})


class OncePerRunThrottle(throttling.SimpleRateThrottle):
    rate = "1/min"

    def get_cache_key(self, request, view):
        return f"throttle:kernel-test:{THROTTLE_RUN}:{self.get_ident(request)}"


class ThrottledView(OpenView):
    throttle_classes = (OncePerRunThrottle,)

    def get(self, request):
        return Response({"ok": True})


class BoomView(OpenView):
    def get(self, request):
        raise RuntimeError("the view failed")


def plain_boom_view(request):
    raise RuntimeError("a plain Django view failed")


def plain_forbidden_view(request):
    raise PermissionDenied


def plain_missing_view(request):
    raise Http404("no such thing")


def plain_body_length_view(request):
    return JsonResponse({"length": len(request.body)})


def plain_suspicious_view(request):
    raise SuspiciousOperation("a forged session")


class DecryptView(OpenView):
    """Opens a token sealed under another secret: a clear error, never a crash."""

    def post(self, request):
        return Response({"plaintext": crypto.decrypt(request.data["token"])})


class ForwardView(OpenView):
    """Calls the URL it is given through the shared outgoing client."""

    def get(self, request):
        response = http.session().get(request.query_params["url"])
        return Response(response.json())


class WidgetSerializer(BaseModelSerializer):
    class Meta:
        model = Widget
        fields = ("id", "name", "quantity", "parent", "created_by", "created_at")


class WidgetViewSet(viewsets.ModelViewSet):
    authentication_classes = ()
    permission_classes = (permissions.AllowAny,)
    serializer_class = WidgetSerializer
    queryset = Widget.objects.all()
