"""Serializer base: snowflake ids (and references to them) travel as strings in JSON."""

from __future__ import annotations

from rest_framework import serializers

from merchant_platform.models import SnowflakeIdField


class SnowflakeField(serializers.Field):
    """A snowflake id: written as a string, read from a string or an integer."""

    default_error_messages = {"invalid": "A valid id (a positive 64-bit integer, as a string) is required."}

    def to_representation(self, value):
        return str(value)

    def to_internal_value(self, data):
        try:
            value = int(str(data), 10)
        except (TypeError, ValueError):
            self.fail("invalid")
        if not 0 < value < 2**63:
            self.fail("invalid")
        return value


class SnowflakeRelatedField(serializers.PrimaryKeyRelatedField):
    def to_representation(self, value):
        return str(value.pk)

    def to_internal_value(self, data):
        return super().to_internal_value(SnowflakeField().to_internal_value(data))


class BaseModelSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping, SnowflakeIdField: SnowflakeField}
    serializer_related_field = SnowflakeRelatedField
