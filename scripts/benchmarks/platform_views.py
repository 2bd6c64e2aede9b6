"""Bench-only views served through the product's full stack (middleware, DRF, the kernel's error
handler and serializer base, the pooled connection of the service's database alias)."""

from rest_framework.generics import RetrieveAPIView
from rest_framework.permissions import AllowAny

from apps.outreach.models import Inquiry
from merchant_platform.serializers import BaseModelSerializer


class InquiryRowSerializer(BaseModelSerializer):
    class Meta:
        model = Inquiry
        fields = ("id", "name", "email", "subject", "status", "created_at")


class InquiryRowView(RetrieveAPIView):
    """One outreach inquiry by primary key (its `outreach` alias and schema, soft-deleted rows
    hidden): a plain DRF retrieve without authentication, so the figure is the cost of the stack
    plus one indexed SELECT. Authenticated reads are measured by the identity and outreach targets."""

    queryset = Inquiry.objects.all()
    serializer_class = InquiryRowSerializer
    authentication_classes = ()
    permission_classes = (AllowAny,)
