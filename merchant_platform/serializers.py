"""Serializer bases: snowflake ids (and references to them) travel as strings in JSON, and each
serializer instance gets its declared fields without DRF's costly deep copy; plus the strict input
pieces every service's input serializers use (unknown keys refused, strings only, no control
characters, E.164 phone numbers). A field declared under its camelCase API name reads and writes
the snake_case attribute of the same words, without a `source=` saying so."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping

import phonenumbers
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

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


_MUTABLE = (list, dict, set, bytearray)


def copy_field(field: serializers.Field) -> serializers.Field:
    """A declared field's own copy for one serializer instance.

    DRF deep-copies every declared field whenever a serializer is instantiated, and a field's deep
    copy runs its constructor again: most of what a small serializer costs. A
    plain field needs less. A shallow copy is a new object, so `bind()` and any attribute set on it
    stay with this serializer instance; the containers code may change in place (`validators`,
    `error_messages`, `style`) are copied as well. Still deep-copied: a field that holds other
    fields (a nested serializer, `ListField.child`, `ManyRelatedField.child_relation`), because its
    inner field is bound to it, and a field with a mutable `default` or `initial` (`default=[]`),
    which DRF hands out as it is, so each instance needs its own."""
    if (
        isinstance(field, serializers.BaseSerializer)
        or hasattr(field, "child")
        or hasattr(field, "child_relation")
        or isinstance(field.default, _MUTABLE)
        or isinstance(field.initial, _MUTABLE)
    ):
        return copy.deepcopy(field)
    clone = object.__new__(type(field))  # copy.copy's result for a field, without its generic protocol (3x the cost)
    clone.__dict__.update(field.__dict__)
    clone.error_messages = dict(field.error_messages)
    clone.style = dict(field.style)
    if "_validators" in field.__dict__:  # otherwise `validators` computes them on first use, per copy
        clone._validators = list(field._validators)
    return clone


# The serializer context key of the write guard: a callable (instance, validated_data) that the
# policy layer's views put there (PolicyScopedMixin.authorize_changes) and that raises when the
# caller may not make the write's tenant or owner changes. The bases call it once the data is valid.
WRITE_GUARD = "write_guard"


class WriteGuardMixin:
    def is_valid(self, *, raise_exception=False):
        valid = super().is_valid(raise_exception=raise_exception)
        guard = self.context.get(WRITE_GUARD)
        if valid and guard is not None and self.instance is not None:
            guard(self.instance, self.validated_data)
        return valid


# The bases and their mixins explain themselves in comments, not docstrings: drf-spectacular shows
# the first docstring in a serializer's MRO as the OpenAPI description of every serializer that has
# none of its own.


# Reject keys the serializer does not accept for writing (unknown or read-only): a client that
# misspells a field, or sends one it may not set, hears about it instead of being ignored. Every
# kernel serializer base has it.
class StrictFieldsMixin:
    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(str(key) for key in data if key not in writable)
            if unknown:
                raise serializers.ValidationError({key: ["This field is not accepted here."] for key in unknown[:20]})
        return super().to_internal_value(data)


_CAMEL_HUMP = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(name: str) -> str:
    """The snake_case attribute of a camelCase API name: `merchantId` -> `merchant_id`."""
    return _CAMEL_HUMP.sub("_", name).lower()


# The API speaks camelCase, the models and services snake_case: a field declared under a camelCase
# name with no `source` gets the snake_case one (`unitCostAmount` reads `unit_cost_amount`, and
# validates to that key). Set once per class, on the declared field and on the constructor keywords
# a deep copy replays, so it costs nothing per request. A field whose attribute is named otherwise
# keeps its `source=`. A serializer of a dict already keyed by the API's names (an answer built in
# the view, input the view reads by those names) sets `snake_case_sources = False`.
class SnakeCaseSourcesMixin:
    snake_case_sources = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.snake_case_sources:
            return
        for name, field in cls._declared_fields.items():
            if field.source is None and (attribute := snake_case(name)) != name:
                field.source = attribute
                field._kwargs["source"] = attribute


# The platform's plain serializer: DRF's `Serializer`, strict, with `copy_field` instead of the deep
# copy of the declared fields (the same behaviour for less CPU).
class BaseSerializer(SnakeCaseSourcesMixin, WriteGuardMixin, StrictFieldsMixin, serializers.Serializer):
    def get_fields(self):
        return {name: copy_field(field) for name, field in self._declared_fields.items()}


# The platform's model serializer: ids as strings, and the fields built once per class. DRF's
# ModelSerializer builds every field on each instantiation (the declared ones deep-copied, the others
# constructed from the model). What it builds depends only on the class (`Meta`,
# the declared fields, the model), so this builds it on the first instantiation and gives each
# instance `copy_field` copies. A serializer whose fields depend on the request edits `self.fields`
# (or the dict `super().get_fields()` returns), never the build hooks (`get_field_names`,
# `build_field`, `get_extra_kwargs`), which run once per class.
class BaseModelSerializer(SnakeCaseSourcesMixin, WriteGuardMixin, StrictFieldsMixin, serializers.ModelSerializer):
    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping, SnowflakeIdField: SnowflakeField}
    serializer_related_field = SnowflakeRelatedField

    def get_fields(self):
        cls = type(self)
        built = cls.__dict__.get("_built_fields")  # this class's own, never a parent's
        if built is None:
            built = cls._built_fields = _nullable_like_their_columns(self.Meta.model, super().get_fields())
        return {name: copy_field(field) for name, field in built.items()}


def _nullable_like_their_columns(model, fields: dict) -> dict:
    """A declared read-only field whose source is a nullable column renders null for a row without
    a value: say so (`allow_null`), so the OpenAPI document marks it nullable as the answers are.
    ModelSerializer does this for the fields it builds, not for declared ones (`lastSignInAt`)."""
    columns = {field.name: field for field in model._meta.concrete_fields}
    for field in fields.values():
        column = columns.get(field.source) if field.read_only and isinstance(field.source, str) else None
        if column is not None and column.null:
            field.allow_null = True
    return fields


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_BUT_LINE_BREAKS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def single_line(value: str) -> None:
    if _CONTROL.search(value):
        raise serializers.ValidationError("Control characters (line breaks included) are not allowed.")


def multi_line(value: str) -> None:
    if _CONTROL_BUT_LINE_BREAKS.search(value):
        raise serializers.ValidationError("Control characters other than line breaks and tabs are not allowed.")


class ProhibitSurrogateCharacters(ProhibitSurrogateCharactersValidator):
    """DRF's check, same message and code, as one regular-expression search: DRF's loops over every
    character in Python, which dominates the cost of a long message."""

    def __call__(self, value):
        if match := _SURROGATE.search(str(value)):
            raise serializers.ValidationError(self.message.format(code_point=ord(match.group())), code=self.code)


class StrictCharField(serializers.CharField):
    """A JSON string, nothing else (DRF would turn 42 into "42")."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [
            ProhibitSurrogateCharacters() if type(validator) is ProhibitSurrogateCharactersValidator else validator
            for validator in self.validators
        ]

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class CodeField(StrictCharField):
    """A code from a fixed list (a currency, a country), in capitals; the OpenAPI documents list the
    codes as the field's enum (merchant_platform/openapi.py)."""

    def __init__(self, *, codes: frozenset[str], message: str, **kwargs):
        self.codes, self.message = codes, message
        super().__init__(max_length=3, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value not in self.codes:
            raise serializers.ValidationError(self.message)
        return value


class MoneyAmountField(serializers.IntegerField):
    """Money in minor units: a JSON integer from 0 (not a string, a float or a boolean). What a
    service does above MAX_AMOUNT is its own (400 AMOUNT_TOO_LARGE); the OpenAPI documents give
    MAX_AMOUNT as the maximum (merchant_platform/openapi.py)."""

    default_error_messages = {"invalid": "Give a whole, non-negative number of minor units (a JSON integer)."}

    def __init__(self, **kwargs):
        super().__init__(min_value=0, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class PhoneField(StrictCharField):
    """An international phone number (+ and country code), stored in E.164."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 32)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not value:
            return ""
        try:
            number = phonenumbers.parse(value, None)
        except phonenumbers.NumberParseException:
            raise serializers.ValidationError("Enter an international phone number, starting with + and the country code.") from None
        if not phonenumbers.is_valid_number(number):
            raise serializers.ValidationError("This phone number is not valid.")
        return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
