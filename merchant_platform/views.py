"""View bases every service shares: public endpoints, operator viewsets behind the policy layer,
and how a request names its caller."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import viewsets
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from merchant_platform.authentication_classes import JWTAuthentication, ServiceBasicAuthentication
from merchant_platform.errors import ApiError
from merchant_platform.parsers import JSONParser
from merchant_platform.policy import PolicyPermission, PolicyScopedMixin

# The bases explain themselves in comments, not docstrings: drf-spectacular would show a base's
# docstring as the OpenAPI description of every view that has none of its own.


# No authentication, JSON only, a body of at most `max_body_bytes` (None: the global
# MAX_REQUEST_BODY_BYTES the middleware already enforces).
class PublicView(APIView):
    authentication_classes = ()
    permission_classes = (AllowAny,)
    parser_classes = (JSONParser,)
    max_body_bytes: int | None = None

    def perform_authentication(self, request):
        """Nothing to authenticate: `request.user` stays lazy (DRF's documented override), which
        spares every public request building an AnonymousUser it never reads."""

    def initial(self, request, *args, **kwargs):
        limit = self.max_body_bytes
        # The global middleware already refused bodies over MAX_REQUEST_BODY_BYTES and bad lengths.
        if limit is not None and int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise ApiError(
                f"The request body is larger than this endpoint accepts ({limit} bytes).",
                code="PAYLOAD_TOO_LARGE",
                status_code=413,
            )
        super().initial(request, *args, **kwargs)


# JWT (and, with `authentication_classes = SERVICE_AUTHENTICATION`, HTTP Basic for platform
# services), the policy layer, django-filter, and snowflake ids in the URL.
class OperatorViewSet(PolicyScopedMixin, viewsets.GenericViewSet):
    authentication_classes = (JWTAuthentication,)
    permission_classes = (PolicyPermission,)
    filter_backends = (DjangoFilterBackend,)
    lookup_value_regex = "[0-9]+"

    def validated_body(self, serializer_class, record=None, data=None) -> dict:
        """The request body (or `data`, e.g. the query parameters) validated by `serializer_class`;
        with `record`, a change of its tenant or owner is authorized in the target tenant too."""
        body = serializer_class(data=self.request.data if data is None else data)
        body.is_valid(raise_exception=True)
        if record is not None:
            self.authorize_changes(record, body.validated_data)
        return body.validated_data


# A user token or the service credentials (HTTP Basic, spec 5).
SERVICE_AUTHENTICATION = (JWTAuthentication, ServiceBasicAuthentication)


def actor_of(request) -> str:
    """How an audit trail names the caller: user:<id> or service:<name>."""
    user = request.user
    return user.id if getattr(user, "is_service", False) else f"user:{user.id}"


def user_id_of(request) -> int | None:
    """The caller's user id for created_by (None for a service-to-service call)."""
    user = request.user
    return None if getattr(user, "is_service", False) else user.id
