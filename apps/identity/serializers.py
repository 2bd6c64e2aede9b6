"""Request and response shapes of identity's API (camelCase, ids as strings)."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from apps.identity.models import User
from merchant_platform.models import PolicyDefinition
from merchant_platform.serializers import BaseModelSerializer, BaseSerializer, SnowflakeField


class UserSerializer(BaseModelSerializer):
    id = SnowflakeField(read_only=True)
    emailVerified = serializers.SerializerMethodField()
    phoneVerified = serializers.SerializerMethodField()
    isActive = serializers.BooleanField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    lastSignInAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = User
        fields = ("id", "email", "phone", "username", "emailVerified", "phoneVerified", "isActive", "createdAt", "lastSignInAt")
        read_only_fields = fields

    def get_emailVerified(self, user: User) -> bool:
        return user.email_verified_at is not None

    def get_phoneVerified(self, user: User) -> bool:
        return user.phone_verified_at is not None


class TokenPairSerializer(BaseSerializer):
    snake_case_sources = False

    tokenType = serializers.CharField(default="Bearer")
    accessToken = serializers.CharField(source="access_token", help_text="ES256 JWT; send as `Authorization: Bearer <accessToken>`.")
    expiresIn = serializers.IntegerField(source="expires_in", help_text="Seconds until the access token expires.")
    refreshToken = serializers.CharField(source="refresh_token", help_text="Opaque; single use (each refresh rotates it).")
    refreshExpiresIn = serializers.IntegerField(source="refresh_expires_in")
    user = UserSerializer()

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["tokenType"] = "Bearer"
        return data


def _password(**kwargs) -> serializers.CharField:
    return serializers.CharField(write_only=True, trim_whitespace=False, max_length=1024, style={"input_type": "password"}, **kwargs)


def _new_password() -> serializers.CharField:
    """A password being chosen: the schema states the minimum length services.py enforces."""
    return _password(min_length=settings.IDENTITY_PASSWORD_MIN_LENGTH)


class SignUpSerializer(BaseSerializer):
    email = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=254)
    phone = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=32, help_text="E.164, e.g. +14155550123.")
    username = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=32)
    password = _new_password()


class SignInSerializer(BaseSerializer):
    identifier = serializers.CharField(max_length=254, help_text="Email, phone number (E.164) or username.")
    password = _password()


class RefreshSerializer(BaseSerializer):
    snake_case_sources = False

    refreshToken = serializers.CharField(max_length=256)


class OtpRequestSerializer(BaseSerializer):
    identifier = serializers.CharField(max_length=254, help_text="verify-email: an email; phone-auth: a phone; forgot-password: either.")


class OtpRequestAcceptedSerializer(BaseSerializer):
    snake_case_sources = False

    namespace = serializers.CharField()
    channel = serializers.ChoiceField(choices=["email", "sms"])
    status = serializers.CharField()
    expiresIn = serializers.IntegerField()
    resendAfter = serializers.IntegerField()


class OtpVerifySerializer(BaseSerializer):
    identifier = serializers.CharField(max_length=254)
    code = serializers.CharField(max_length=12)


class PasswordResetSerializer(OtpVerifySerializer):
    snake_case_sources = False

    newPassword = _new_password()


class EmailVerifiedSerializer(BaseSerializer):
    status = serializers.CharField()
    user = UserSerializer()


class ChangePasswordSerializer(BaseSerializer):
    snake_case_sources = False

    currentPassword = _password()
    newPassword = _new_password()


class PolicySerializer(BaseModelSerializer):
    id = SnowflakeField(read_only=True)
    subjectType = serializers.CharField(read_only=True)
    subjectId = SnowflakeField(help_text="The user's id.")
    createdAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = PolicyDefinition
        fields = ("id", "kind", "subjectType", "subjectId", "role", "resource", "action", "domain", "effect", "source", "createdAt")
        read_only_fields = ("id", "subjectType", "source", "createdAt")

    def validate(self, attrs):
        kind = attrs["kind"]
        if kind == PolicyDefinition.Kind.ROLE and not attrs.get("role"):
            raise serializers.ValidationError({"role": ["A ROLE policy names the role."]})
        if kind == PolicyDefinition.Kind.PERMISSION and not (attrs.get("resource") and attrs.get("action")):
            raise serializers.ValidationError({"resource": ["A PERMISSION policy names a resource and an action."]})
        if kind == PolicyDefinition.Kind.JOIN_DOMAIN and attrs.get("domain", "*") == "*":
            raise serializers.ValidationError({"domain": ["A JOIN_DOMAIN policy names the merchant id."]})
        return attrs
