"""HTTP of licensing: each view translates a request into a service call and back.

Every route requires authentication (a user token, or HTTP Basic for platform services) and goes
through the policy layer (merchant_platform.policy). The spec says the license read routes
"currently skip authorization"; we do not: a license carries its key, so reads are scoped like every
other record (docs/services/licensing.md). Tenant: the license's merchant_id; owner: its owner_id.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.licensing import selectors, services
from apps.licensing.filters import ActivationFilter, LicenseFilter, PolicyFilter
from apps.licensing.models import License, Policy
from apps.licensing.serializers import (
    VALIDATION_OUTPUT,
    ActivationCreateSerializer,
    ActivationSerializer,
    LicenseCreateSerializer,
    LicenseSerializer,
    LicenseUpdateSerializer,
    PolicySerializer,
    PolicyUpdateSerializer,
    RenewSerializer,
    ValidateKeySerializer,
    ValidateSerializer,
    ValidationSerializer,
)
from apps.licensing.states import ValidationCode
from merchant_platform.errors import NotFound
from merchant_platform.policy import CREATE, scope_queryset
from merchant_platform.views import ServiceViewSet, actor_of, user_id_of

LICENSE = "licensing.License"
VALIDATE = "validate"
RENEW = "renew"
ILLEGAL_TRANSITION = OpenApiResponse(
    description="A problem document: LICENSE_INVALID_TRANSITION (the state machine forbids the action from the license's status), "
    "LICENSE_REVOKED, or LICENSE_NOT_RENEWABLE (renew)."
)


class LicenseViewSet(ServiceViewSet):
    policy_resource = LICENSE
    policy_tenant_field = "merchant_id"
    policy_owner_field = "owner_id"
    policy_actions = {"validate_key": VALIDATE}
    serializer_class = LicenseSerializer
    filterset_class = LicenseFilter

    queryset = selectors.licenses()  # PolicyScopedMixin.get_queryset scopes it per caller

    def get_queryset(self):
        licenses = super().get_queryset()
        # validate reads the license and the fingerprint's seat in one query.
        fingerprint = getattr(self, "validated_fingerprint", None)
        return selectors.with_seat(licenses, fingerprint) if fingerprint is not None else licenses

    def _license_response(self, license: License, status_code: int = status.HTTP_200_OK) -> Response:
        return Response(LicenseSerializer(license).data, status=status_code)

    @extend_schema(request=LicenseCreateSerializer, responses={201: LicenseSerializer})
    def create(self, request):
        data = self.validated(LicenseCreateSerializer)
        self.authorize_placement(CREATE, domain=data.get("merchant_id"))
        license = services.license_create(**data, created_by=user_id_of(request), actor=actor_of(request))
        return self._license_response(license, status.HTTP_201_CREATED)

    @extend_schema(request=LicenseUpdateSerializer, responses={200: LicenseSerializer})
    def partial_update(self, request, pk=None):
        license = self.get_object()
        changes = self.validated(LicenseUpdateSerializer, record=license)  # a new merchant or owner: update there too
        self._authorize_widening(license, changes)
        return self._license_response(services.license_update(license_id=license.id, **changes))

    def _authorize_widening(self, license: License, changes: dict) -> None:
        """A PATCH that widens a license needs what widening it otherwise takes, in its merchant: a
        later (or no) expiry needs `renew`, more seats need `create` (issuing seats is issuing a
        license). Narrowing needs only `update`."""
        if "expires_at" in changes:
            new, old = changes["expires_at"], license.expires_at
            if old is not None and (new is None or new > old):
                self.authorize(RENEW, domain=license.merchant_id, owner_id=license.owner_id)
        if "activation_limit" in changes and changes["activation_limit"] > license.activation_limit:
            self.authorize(CREATE, domain=license.merchant_id, owner_id=license.owner_id)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.license_delete(license_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _act(self, request, service, **kwargs) -> Response:
        license = self.get_object()
        return self._license_response(service(license_id=license.id, actor=actor_of(request), **kwargs))

    @extend_schema(request=None, responses={200: LicenseSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/activate")
    def activate(self, request, pk=None):
        return self._act(request, services.license_activate)

    @extend_schema(request=None, responses={200: LicenseSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/deactivate")
    def deactivate(self, request, pk=None):
        return self._act(request, services.license_deactivate)

    @extend_schema(request=None, responses={200: LicenseSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/suspend")
    def suspend(self, request, pk=None):
        return self._act(request, services.license_suspend)

    @extend_schema(request=None, responses={200: LicenseSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/reinstate")
    def reinstate(self, request, pk=None):
        return self._act(request, services.license_reinstate)

    @extend_schema(request=RenewSerializer, responses={200: LicenseSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/renew")
    def renew(self, request, pk=None):
        return self._act(request, services.license_renew, expires_at=self.validated(RenewSerializer).get("expiresAt"))

    @extend_schema(request=None, responses={200: LicenseSerializer, 409: ILLEGAL_TRANSITION})
    @action(detail=True, methods=["post"], url_path="actions/revoke")
    def revoke(self, request, pk=None):
        return self._act(request, services.license_revoke)

    @extend_schema(request=ValidateSerializer, responses={200: ValidationSerializer})
    @action(detail=True, methods=["post"], url_path="actions/validate")
    def validate(self, request, pk=None):
        data = self.validated(ValidateSerializer)
        self.validated_fingerprint = data["fingerprint"]
        license = self.get_object()
        result = services.license_validate(
            license=license,
            fingerprint=data["fingerprint"],
            take_seat=data["activate"],
            created_by=user_id_of(request),
        )
        return Response(VALIDATION_OUTPUT.to_representation(result))

    @extend_schema(
        request=ValidateKeySerializer,
        responses={200: OpenApiResponse(ValidationSerializer, description="An unknown key answers valid=false, code NOT_FOUND.")},
    )
    @action(detail=False, methods=["post"], url_path="actions/validate-key")
    def validate_key(self, request):
        data = self.validated(ValidateKeySerializer)
        self.validated_fingerprint = data["fingerprint"]
        # Looked up among the licenses the caller may see: another tenant's key answers like an unknown one.
        license = self.get_queryset().filter(key=data["key"]).first()
        if license is None:
            return Response(VALIDATION_OUTPUT.to_representation(services.ValidationResult(ValidationCode.NOT_FOUND)))
        self.check_object_permissions(request, license)
        result = services.license_validate(
            license=license,
            fingerprint=data["fingerprint"],
            take_seat=data["activate"],
            created_by=user_id_of(request),
        )
        return Response(VALIDATION_OUTPUT.to_representation(result))


class ActivationViewSet(ServiceViewSet):
    policy_resource = "licensing.Activation"
    policy_tenant_field = "license__merchant_id"
    policy_owner_field = "license__owner_id"
    serializer_class = ActivationSerializer
    filterset_class = ActivationFilter

    queryset = selectors.activations()  # PolicyScopedMixin.get_queryset scopes it per caller

    @extend_schema(
        request=ActivationCreateSerializer,
        responses={201: ActivationSerializer, 409: OpenApiResponse(description="ACTIVATION_EXISTS: the fingerprint holds a seat.")},
    )
    def create(self, request):
        """Create a seat directly: an operator tool that bypasses the seat limit (spec 4.4)."""
        data = self.validated(ActivationCreateSerializer)
        # Looked up among the licenses the caller may see: another tenant's license answers the same
        # 404 as a missing one, so the route tells nobody which ids exist elsewhere.
        visible = scope_queryset(selectors.licenses(), request.user, LICENSE, tenant_field="merchant_id", owner_field="owner_id")
        license = visible.filter(pk=data["licenseId"]).first()
        if license is None:
            raise NotFound("No license has this id.")
        self.authorize(CREATE, domain=license.merchant_id, owner_id=license.owner_id)
        activation = services.activation_create(
            license_id=data["licenseId"],
            fingerprint=data["fingerprint"],
            name=data.get("name", ""),
            metadata=data.get("metadata"),
            created_by=user_id_of(request),
        )
        return Response(ActivationSerializer(activation).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Free a seat; no audit event is written (spec 4.4)."""
        services.activation_delete(activation_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PolicyViewSet(ServiceViewSet):
    policy_resource = "licensing.Policy"
    serializer_class = PolicySerializer
    filterset_class = PolicyFilter

    queryset = selectors.policies()  # PolicyScopedMixin.get_queryset scopes it per caller

    @extend_schema(request=PolicySerializer, responses={201: PolicySerializer, 409: OpenApiResponse(description="POLICY_CODE_TAKEN")})
    def create(self, request):
        policy = services.policy_create(**self.validated(PolicySerializer), created_by=user_id_of(request))
        return Response(PolicySerializer(policy).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=PolicyUpdateSerializer, responses={200: PolicySerializer})
    def partial_update(self, request, pk=None):
        policy: Policy = self.get_object()
        changes = self.validated(PolicyUpdateSerializer, partial=True)
        return Response(PolicySerializer(services.policy_update(policy_id=policy.id, **changes)).data)
