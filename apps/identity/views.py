"""Identity's HTTP API: translates requests to services.py calls and back."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.identity import identifiers, keys, otp, selectors, services
from apps.identity.filters import PolicyFilter, UserFilter
from apps.identity.guard import client_ip
from apps.identity.models import User
from apps.identity.serializers import (
    ChangePasswordSerializer,
    EmailVerifiedSerializer,
    OtpRequestAcceptedSerializer,
    OtpRequestSerializer,
    OtpVerifySerializer,
    PasswordResetSerializer,
    PolicySerializer,
    RefreshSerializer,
    SignInSerializer,
    SignUpSerializer,
    TokenPairSerializer,
    UserSerializer,
)
from merchant_platform import policy as authorization
from merchant_platform.authentication_classes import JWTAuthentication, ServiceBasicAuthentication
from merchant_platform.models import PolicyDefinition
from merchant_platform.policy import IsServicePrincipal
from merchant_platform.views import OperatorViewSet, PublicView, ValidatingMixin

AUTH_TAG = ["auth"]


class SignUpView(PublicView):
    @extend_schema(tags=AUTH_TAG, request=SignUpSerializer, responses={201: TokenPairSerializer}, summary="Create an account and sign in")
    def post(self, request):
        pair = services.user_sign_up(**self.validated(SignUpSerializer))
        return Response(TokenPairSerializer(pair).data, status=status.HTTP_201_CREATED)


class SignInView(PublicView):
    @extend_schema(
        tags=AUTH_TAG,
        request=SignInSerializer,
        responses={200: TokenPairSerializer},
        summary="Sign in with an email, phone number or username and a password",
        description="401 INVALID_CREDENTIALS for any wrong identifier or password; 403 IDENTIFIER_UNVERIFIED for the right "
        "password given with an email or phone number nobody has verified; 429 SIGN_IN_LOCKED (Retry-After) after "
        "too many failures for the identifier or the client IP.",
    )
    def post(self, request):
        data = self.validated(SignInSerializer)
        pair = services.user_sign_in(identifier=data["identifier"], password=data["password"], ip=client_ip(request))
        return Response(TokenPairSerializer(pair).data)


class RefreshView(PublicView):
    @extend_schema(tags=AUTH_TAG, request=RefreshSerializer, responses={200: TokenPairSerializer}, summary="Rotate a refresh token")
    def post(self, request):
        pair = services.token_refresh(refresh_token=self.validated(RefreshSerializer)["refreshToken"])
        return Response(TokenPairSerializer(pair).data)


class SignOutView(PublicView):
    @extend_schema(tags=AUTH_TAG, request=RefreshSerializer, responses={204: None}, summary="Revoke the session of a refresh token")
    def post(self, request):
        services.session_sign_out(refresh_token=self.validated(RefreshSerializer)["refreshToken"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class OtpRequestView(PublicView):
    @extend_schema(
        tags=AUTH_TAG,
        request=OtpRequestSerializer,
        responses={202: OtpRequestAcceptedSerializer, 503: OpenApiResponse(description="OTP store, mail or SMS unavailable")},
        summary="Send a one-time code (same answer whether or not an account has the identifier)",
        parameters=[OpenApiParameter("namespace", str, OpenApiParameter.PATH, enum=list(otp.NAMESPACES))],
    )
    def post(self, request, namespace: str):
        body = services.otp_request(namespace=namespace, identifier=self.validated(OtpRequestSerializer)["identifier"])
        return Response(body, status=status.HTTP_202_ACCEPTED)


class VerifyEmailView(PublicView):
    @extend_schema(
        tags=AUTH_TAG, request=OtpVerifySerializer, responses={200: EmailVerifiedSerializer}, summary="Verify an email with its code"
    )
    def post(self, request):
        data = self.validated(OtpVerifySerializer)
        user = services.otp_verify_email(identifier=data["identifier"], code=data["code"])
        return Response({"status": "VERIFIED", "user": UserSerializer(user).data})


class PhoneAuthVerifyView(PublicView):
    @extend_schema(
        tags=AUTH_TAG,
        request=OtpVerifySerializer,
        responses={200: TokenPairSerializer},
        summary="Sign in with a code sent by SMS",
        description="403 IDENTIFIER_UNVERIFIED when the account's phone number was never verified: reset the password "
        "through it (forgot-password) first, which verifies it.",
    )
    def post(self, request):
        data = self.validated(OtpVerifySerializer)
        return Response(TokenPairSerializer(services.otp_phone_sign_in(identifier=data["identifier"], code=data["code"])).data)


class PasswordResetView(PublicView):
    @extend_schema(
        tags=AUTH_TAG, request=PasswordResetSerializer, responses={204: None}, summary="Reset a forgotten password with its code"
    )
    def post(self, request):
        data = self.validated(PasswordResetSerializer)
        services.otp_reset_password(identifier=data["identifier"], code=data["code"], new_password=data["newPassword"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class CurrentUserMixin:
    authentication_classes = (JWTAuthentication,)
    permission_classes = (permissions.IsAuthenticated,)

    def current_user(self, request) -> User:
        user = selectors.user_get(request.user.id)
        if user is None or not user.is_active:
            raise NotFound("The account of this token no longer exists.")
        return user


class MeView(CurrentUserMixin, APIView):
    @extend_schema(tags=["users"], responses={200: UserSerializer}, summary="The signed-in user")
    def get(self, request):
        return Response(UserSerializer(self.current_user(request)).data)


class ChangePasswordView(CurrentUserMixin, ValidatingMixin, APIView):
    @extend_schema(
        tags=["users"],
        request=ChangePasswordSerializer,
        responses={200: TokenPairSerializer},
        summary="Change the password (every other session ends; this client gets new tokens)",
        description="400 CURRENT_PASSWORD_WRONG for a wrong current password; 429 SIGN_IN_LOCKED (Retry-After) after too many "
        "wrong current passwords for the account or the client IP, even with the right one.",
    )
    def post(self, request):
        data = self.validated(ChangePasswordSerializer)
        user = self.current_user(request)
        pair = services.user_change_password(
            user=user, current_password=data["currentPassword"], new_password=data["newPassword"], ip=client_ip(request)
        )
        return Response(TokenPairSerializer(pair).data)


class UserViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, OperatorViewSet):
    """Accounts, for holders of identity.User.read (administrators)."""

    serializer_class = UserSerializer
    queryset = User.objects.order_by("id")
    policy_resource = "identity.User"
    filterset_class = UserFilter


@extend_schema(tags=["policies"])
class PolicyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, OperatorViewSet):
    """Policies of users: roles, permissions and tenant memberships (`domain` is the tenant)."""

    serializer_class = PolicySerializer
    queryset = PolicyDefinition.objects.filter(subject_type=PolicyDefinition.SubjectType.USER).order_by("id")
    policy_resource = "identity.PolicyDefinition"
    policy_tenant_field = "domain"
    filterset_class = PolicyFilter

    def perform_create(self, serializer):
        data = serializer.validated_data
        data.setdefault("domain", authorization.ANY)
        self.policy_create_kwargs(data)
        kind, user_id, domain = data["kind"], data["subject_id"], data["domain"]
        try:
            if kind == PolicyDefinition.Kind.ROLE:
                row = authorization.policy_grant_role(user_id=user_id, role=data["role"], domain=domain)
            elif kind == PolicyDefinition.Kind.PERMISSION:
                row = authorization.policy_grant_permission(
                    user_id=user_id, resource=data["resource"], action=data["action"], domain=domain, effect=data.get("effect", "allow")
                )
            else:
                row = authorization.policy_join_domain(user_id=user_id, domain=domain)
        except ValueError as exc:
            raise ValidationError({"role": [str(exc)]}) from None
        serializer.instance = row

    def perform_destroy(self, instance):
        authorization.policy_revoke(policy_id=instance.pk)


class InternalUserViewSet(viewsets.ReadOnlyModelViewSet):
    """For platform services only (HTTP Basic): look accounts up by id or identifier."""

    authentication_classes = (ServiceBasicAuthentication,)
    permission_classes = (IsServicePrincipal,)
    serializer_class = UserSerializer
    queryset = User.objects.order_by("id")
    lookups = {"email": identifiers.normalize_email, "phone": identifiers.normalize_phone, "username": identifiers.normalize_username}

    @extend_schema(parameters=[OpenApiParameter(name, str, description="any format; normalized like sign-in") for name in lookups])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def get_queryset(self):
        queryset = super().get_queryset()
        for name, normalize in self.lookups.items():
            raw = self.request.query_params.get(name)
            if raw:
                try:
                    queryset = queryset.filter(**{name: normalize(raw)})
                except identifiers.InvalidIdentifier as exc:
                    raise ValidationError({name: [str(exc)]}) from None
        return queryset


@require_GET
def jwks_view(request):
    """GET /jw-certs: the public keys that verify identity's tokens (public, outside the API base)."""
    response = JsonResponse(keys.public_jwks())
    response["Cache-Control"] = "public, max-age=60"
    return response
