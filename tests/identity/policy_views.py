"""Test-only views that declare the policy layer as a service would (routed by tests.identity.urls).

The kernel's sample `Widget` has no merchant column, so its integer `quantity` stands in for the
tenant (merchant id) here; `created_by` is its owner column.
"""

from __future__ import annotations

from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from merchant_platform.authentication_classes import JWTAuthentication, ServiceBasicAuthentication
from merchant_platform.policy import IsServicePrincipal, PolicyPermission, PolicyScopedMixin
from merchant_platform.serializers import BaseModelSerializer
from tests.kernel.sample.models import Widget


class WidgetSerializer(BaseModelSerializer):
    class Meta:
        model = Widget
        fields = ("id", "name", "quantity", "created_by")
        read_only_fields = ("created_by",)


class TenantWidgetViewSet(PolicyScopedMixin, viewsets.ModelViewSet):
    authentication_classes = (JWTAuthentication, ServiceBasicAuthentication)
    permission_classes = (PolicyPermission,)
    serializer_class = WidgetSerializer
    queryset = Widget.objects.all()
    policy_resource = "test.Widget"
    policy_tenant_field = "quantity"
    policy_owner_field = "created_by"

    @action(detail=True, methods=["post"])
    def archive(self, request, pk=None):
        widget = self.get_object()
        return Response({"archived": str(widget.pk)})


class OwnWidgetViewSet(PolicyScopedMixin, viewsets.ReadOnlyModelViewSet):
    """A resource without tenant: global permissions, or OWNER on its own rows."""

    authentication_classes = (JWTAuthentication,)
    permission_classes = (PolicyPermission,)
    serializer_class = WidgetSerializer
    queryset = Widget.objects.all()
    policy_resource = "test.Gadget"
    policy_owner_field = "created_by"


class WhoAmIView(APIView):
    authentication_classes = (JWTAuthentication,)

    def get(self, request):
        return Response({"userId": str(request.user.id), "jti": request.user.token_id})


class InternalView(APIView):
    authentication_classes = (ServiceBasicAuthentication, JWTAuthentication)
    permission_classes = (IsServicePrincipal,)

    def get(self, request):
        return Response({"caller": request.user.username})
