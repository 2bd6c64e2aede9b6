"""JSON shapes of licensing. Field names are camelCase, as the spec spells them (expiresAt,
lastValidatedAt); ids travel as strings."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.licensing import selectors
from apps.licensing.models import Policy
from apps.licensing.states import LicenseStatus, ValidationCode
from merchant_platform.serializers import BaseModelSerializer, BaseSerializer, SnowflakeField

MAX_ACTIVATION_LIMIT = 100_000
MAX_DURATION_SECONDS = 2**31 - 1  # the column is a PostgreSQL integer (about 68 years)


def entitlements_field() -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField(max_length=64), max_length=100, required=False)


class ActivationConfigSerializer(BaseSerializer):
    """IActivationConfig (spec 2.1)."""

    limit = serializers.IntegerField(min_value=0, max_value=MAX_ACTIVATION_LIMIT)


class ActivationLimitInput(ActivationConfigSerializer):
    """activationConfig as input: `{"limit": n}` validates to the service's `activation_limit`."""

    def to_internal_value(self, data):
        return super().to_internal_value(data)["limit"]


class PolicySerializer(BaseModelSerializer):
    durationSeconds = serializers.IntegerField(min_value=1, max_value=MAX_DURATION_SECONDS, allow_null=True, required=False)
    activationLimit = serializers.IntegerField(min_value=0, max_value=MAX_ACTIVATION_LIMIT, required=False)
    entitlements = entitlements_field()
    isTrial = serializers.BooleanField(required=False)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = Policy
        fields = [
            "id",
            "code",
            "name",
            "durationSeconds",
            "activationLimit",
            "entitlements",
            "isTrial",
            "createdBy",
            "createdAt",
            "updatedAt",
        ]
        # Uniqueness is the service's check (409 POLICY_CODE_TAKEN), soft-deleted codes included.
        extra_kwargs = {"code": {"validators": [RegexValidator(r"^[A-Za-z0-9_.-]+$", "Letters, digits, '_', '.' and '-' only.")]}}


class PolicyUpdateSerializer(PolicySerializer):
    class Meta(PolicySerializer.Meta):
        read_only_fields = ["code"]


@extend_schema_field(OpenApiTypes.STR)
class PolicyCodeField(serializers.Field):
    """The code of the license's policy, from its id."""

    def to_representation(self, policy_id):
        return selectors.policy_code(policy_id)


class LicenseSerializer(BaseSerializer):
    """A license as every route answers it (output only: writes go through the services). A plain
    Serializer, not a ModelSerializer, because validate answers with it on the hot path."""

    id = SnowflakeField(read_only=True)
    key = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    ownerId = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True, allow_null=True)
    policyId = SnowflakeField(read_only=True)
    policy = PolicyCodeField(source="policy_id", read_only=True)
    status = serializers.ChoiceField(choices=LicenseStatus.choices, read_only=True)
    expiresAt = serializers.DateTimeField(read_only=True, allow_null=True)
    lastValidatedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    activationConfig = ActivationConfigSerializer(read_only=True)
    entitlements = serializers.ListField(child=serializers.CharField(), read_only=True)
    metadata = serializers.DictField(read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class LicenseCreateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.license_create."""

    ownerId = SnowflakeField()
    merchantId = SnowflakeField(required=False, allow_null=True, help_text="The merchant whose staff may use the license.")
    policyId = SnowflakeField(required=False, help_text="Default: the seeded free-trial policy.")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    expiresAt = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Default: now plus the policy's duration; null: never."
    )
    activationConfig = ActivationLimitInput(source="activation_limit", required=False, help_text="Default: the policy's activation limit.")
    entitlements = entitlements_field()
    metadata = serializers.DictField(required=False)

    def validate(self, attrs):
        # An explicit null expiry means "never", not "the policy's default".
        attrs["perpetual"] = "expires_at" in attrs and attrs["expires_at"] is None
        return attrs


class LicenseUpdateSerializer(BaseSerializer):
    """PATCH /licenses/{id}: plain fields only; status changes go through the actions. Validates to
    the keyword arguments of services.license_update."""

    ownerId = SnowflakeField(required=False)
    merchantId = SnowflakeField(required=False, allow_null=True)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    expiresAt = serializers.DateTimeField(required=False, allow_null=True)
    activationConfig = ActivationLimitInput(source="activation_limit", required=False)
    entitlements = entitlements_field()
    metadata = serializers.DictField(required=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give at least one field to change.")
        return attrs


class RenewSerializer(BaseSerializer):
    snake_case_sources = False

    expiresAt = serializers.DateTimeField(required=False, help_text="Default: one policy duration past the current expiry.")

    def validate_expiresAt(self, value):
        if value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value


class ActivationSerializer(BaseSerializer):
    """A seat (output only)."""

    id = SnowflakeField(read_only=True)
    licenseId = SnowflakeField(read_only=True)
    fingerprint = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    metadata = serializers.DictField(read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)


class ActivationCreateSerializer(BaseSerializer):
    snake_case_sources = False

    licenseId = SnowflakeField()
    fingerprint = serializers.CharField(max_length=255)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    metadata = serializers.DictField(required=False)


class ValidateSerializer(BaseSerializer):
    fingerprint = serializers.CharField(max_length=255)
    activate = serializers.BooleanField(
        default=True, help_text="Take a free seat for a fingerprint that holds none (false: answer UNKNOWN_FINGERPRINT)."
    )


class ValidateKeySerializer(ValidateSerializer):
    key = serializers.CharField(max_length=64)


class ValidationSerializer(BaseSerializer):
    valid = serializers.BooleanField()
    code = serializers.ChoiceField(choices=ValidationCode.choices)
    detail = serializers.CharField()
    license = LicenseSerializer(allow_null=True)
    activation = ActivationSerializer(allow_null=True)

    def to_representation(self, result):
        fields = self.fields
        return {
            "valid": result.valid,
            "code": result.code.value,
            "detail": result.code.label,
            "license": fields["license"].to_representation(result.license) if result.license else None,
            "activation": fields["activation"].to_representation(result.activation) if result.activation else None,
        }


# Validate is the hot path: one serializer, bound once per process, renders every answer (its
# to_representation keeps no per-call state), instead of building and copying ~40 fields a request.
VALIDATION_OUTPUT = ValidationSerializer()
