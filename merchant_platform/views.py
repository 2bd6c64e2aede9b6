"""View bases every service shares: public endpoints, operator viewsets behind the policy layer,
and how a request names its caller."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import mixins, viewsets
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from merchant_platform.authentication_classes import JWTAuthentication, ServiceBasicAuthentication
from merchant_platform.errors import ApiError
from merchant_platform.parsers import JSONParser
from merchant_platform.policy import PolicyPermission, PolicyScopedMixin

# The bases explain themselves in comments, not docstrings: drf-spectacular would show a base's
# docstring as the OpenAPI description of every view that has none of its own.


# The one way a view validates what a request carries: `self.validated(SerializerClass)` is the
# body's validated data (or that of `data`, e.g. `request.query_params.dict()`); a 400 otherwise.
class ValidatingMixin:
    def validated(self, serializer_class, data=None, *, partial: bool = False, context: dict | None = None) -> dict:
        # Only what the caller gives: a serializer may default `partial` itself (the update ones do).
        options = {"partial": True} if partial else {}
        if context is not None:
            options["context"] = context
        serializer = serializer_class(data=self.request.data if data is None else data, **options)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


# No authentication, JSON only, a body of at most `max_body_bytes` (None: the global
# MAX_REQUEST_BODY_BYTES the middleware already enforces).
class PublicView(ValidatingMixin, APIView):
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


# A user token or the service credentials (HTTP Basic, spec 5).
SERVICE_AUTHENTICATION = (JWTAuthentication, ServiceBasicAuthentication)


# JWT (and, with `authentication_classes = SERVICE_AUTHENTICATION`, HTTP Basic for platform
# services), the policy layer, django-filter, and snowflake ids in the URL. `validated(...,
# record=record)` also authorizes a change of the record's tenant or owner in the target tenant.
class OperatorViewSet(ValidatingMixin, PolicyScopedMixin, viewsets.GenericViewSet):
    authentication_classes = (JWTAuthentication,)
    permission_classes = (PolicyPermission,)
    filter_backends = (DjangoFilterBackend,)
    lookup_value_regex = "[0-9]+"

    def validated(self, serializer_class, data=None, *, record=None, partial: bool = False, context: dict | None = None) -> dict:
        validated_data = super().validated(serializer_class, data, partial=partial, context=context)
        if record is not None:
            self.authorize_changes(record, validated_data)
        return validated_data


# A service's records for users and platform services (SERVICE_AUTHENTICATION): list and retrieve,
# the rest per viewset. The query-string filters apply to `filtered_actions` only: a record route
# needs none of their cost.
class ServiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, OperatorViewSet):
    authentication_classes = SERVICE_AUTHENTICATION
    filtered_actions: tuple[str, ...] = ("list",)

    def filter_queryset(self, queryset):
        return super().filter_queryset(queryset) if self.action in self.filtered_actions else queryset


def actor_of(request) -> str:
    """How an audit trail names the caller: user:<id> or service:<name>."""
    user = request.user
    return user.id if getattr(user, "is_service", False) else f"user:{user.id}"


def user_id_of(request) -> int | None:
    """The caller's user id for created_by (None for a service-to-service call)."""
    user = request.user
    return None if getattr(user, "is_service", False) else user.id
