"""HTTP of the ledger service (spec 4.7): translate requests to service calls and back. Every route
is scoped by the job's merchant through the policy layer: another tenant's job is a 404."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.ledger import services
from apps.ledger.filters import LedgerJobFilter
from apps.ledger.models import LedgerJob
from apps.ledger.serializers import LedgerJobCreateSerializer, LedgerJobSerializer
from merchant_platform.authentication_classes import JWTAuthentication
from merchant_platform.policy import CREATE, READ
from merchant_platform.views import ServiceViewSet, user_id_of

LEDGER_JOB = "ledger.LedgerJob"
IN_PROGRESS = OpenApiResponse(description="JOB_IN_PROGRESS: the job is PENDING or PROCESSING.")


class LedgerJobViewSet(ServiceViewSet):
    """Ledger generation jobs of the merchants the caller may read."""

    authentication_classes = (JWTAuthentication,)  # users' jobs: no platform service asks for one
    policy_resource = LEDGER_JOB
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    policy_actions = {"download": READ, "retry": CREATE, "regenerate": CREATE}
    queryset = LedgerJob.objects.all()  # PolicyScopedMixin.get_queryset scopes it per caller
    serializer_class = LedgerJobSerializer
    filterset_class = LedgerJobFilter

    @extend_schema(request=LedgerJobCreateSerializer, responses={202: LedgerJobSerializer})
    def create(self, request):
        """Record the job (PENDING) and publish ledger.generate through the outbox."""
        data = self.validated(LedgerJobCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        job = services.job_create(**data, created_by=user_id_of(request))
        return Response(LedgerJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: LedgerJobSerializer, 409: IN_PROGRESS})
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Run a REJECTED job again (409 JOB_NOT_FAILED for a completed one)."""
        job = services.job_retry(ledger_id=self.get_object().id)
        return Response(LedgerJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: LedgerJobSerializer, 409: IN_PROGRESS})
    @action(detail=True, methods=["post"])
    def regenerate(self, request, pk=None):
        """Render a DRAFT document again (409 LEDGER_NOT_DRAFT for a final one)."""
        job = services.job_regenerate(ledger_id=self.get_object().id)
        return Response(LedgerJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                description="The document (PDF, CSV or XLSX), decrypted chunk by chunk as it streams; each chunk is authenticated "
                "before it is sent, and a damaged document ends the response short of its Content-Length."
            ),
            409: OpenApiResponse(description="JOB_NOT_READY: the job is not COMPLETED."),
        }
    )
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        document = services.job_download(ledger_id=self.get_object().id)
        response = StreamingHttpResponse(document.chunks, content_type=document.content_type)
        if document.content_length is not None:
            response["Content-Length"] = str(document.content_length)
        response["Content-Disposition"] = f'attachment; filename="{document.filename}"'
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "private, no-store"
        return response
