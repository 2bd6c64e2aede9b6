"""OpenAPI helpers: the shared problem shape in every document, and one document per service."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import RegexValidator
from django.urls import include, path
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularRedocView, SpectacularSwaggerView

from merchant_platform.money import MAX_AMOUNT
from merchant_platform.serializers import multi_line, single_line

PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details with a stable code.",
    "required": ["type", "title", "status", "code", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "code": {"type": "string", "example": "VALIDATION_ERROR"},
        "detail": {"type": "string"},
        "requestId": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "field": {"type": "string", "nullable": True},
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                },
            },
        },
    },
}

SNOWFLAKE_SCHEMA = {"type": "string", "pattern": "^[0-9]{1,19}$", "example": "7234051226640384001", "description": "A snowflake id."}
# What SnowflakeField reads: a positive id below 2**63. The pattern stops at 8999999999999999999 (the
# exact bound would be a long expression), which ids reach in the year 2260 or so.
SNOWFLAKE_INPUT_PATTERN = "^(?:[1-9][0-9]{0,17}|[1-8][0-9]{18})$"


class SnowflakeFieldSchema(OpenApiSerializerFieldExtension):
    """Snowflake ids (and references to them) are strings in JSON, whatever the model field says."""

    target_class = "merchant_platform.serializers.SnowflakeField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        if direction == "request":
            return {**SNOWFLAKE_SCHEMA, "pattern": SNOWFLAKE_INPUT_PATTERN}
        return dict(SNOWFLAKE_SCHEMA)


class SnowflakeRelatedFieldSchema(SnowflakeFieldSchema):
    target_class = "merchant_platform.serializers.SnowflakeRelatedField"


class StrictSerializerSchema(OpenApiSerializerExtension):
    """A kernel serializer refuses members it does not accept for writing (StrictFieldsMixin): its
    request body says so with `additionalProperties: false`, so a generated client never sends one."""

    target_class = "merchant_platform.serializers.StrictFieldsMixin"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["additionalProperties"] = False
        return schema


# What the kernel's string validators refuse, as the pattern a generated client can honour; a field
# whose own RegexValidator gives a pattern keeps that one (a schema has one pattern).
_NO_CONTROL_CHARACTERS = "^[^\\u0000-\\u001f\\u007f]*$"
_NO_CONTROL_BUT_LINE_BREAKS = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$"
_NO_NULL_CHARACTER = "^[^\\u0000]*$"


class CharFieldSchema(OpenApiSerializerFieldExtension):
    """A string field states the characters it refuses: control characters for the kernel's
    `single_line`, all but line breaks and tabs for `multi_line`, NUL (every DRF CharField) otherwise."""

    target_class = "rest_framework.fields.CharField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        validators = self.target.validators
        if direction == "request" and not any(isinstance(validator, RegexValidator) for validator in validators):
            if single_line in validators:
                schema["pattern"] = _NO_CONTROL_CHARACTERS
            elif multi_line in validators:
                schema["pattern"] = _NO_CONTROL_BUT_LINE_BREAKS
            else:
                schema["pattern"] = _NO_NULL_CHARACTER
        return schema


class CodeFieldSchema(CharFieldSchema):
    """A code from a fixed list: the list is the enum."""

    target_class = "merchant_platform.serializers.CodeField"
    priority = 1  # before CharFieldSchema, which matches its subclasses

    def map_serializer_field(self, auto_schema, direction):
        schema = super().map_serializer_field(auto_schema, direction)
        schema.pop("pattern", None)
        return {**schema, "enum": sorted(self.target.codes)}


class MoneyAmountFieldSchema(OpenApiSerializerFieldExtension):
    """An amount of minor units: from 0 to the platform's MAX_AMOUNT."""

    target_class = "merchant_platform.serializers.MoneyAmountField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "maximum": MAX_AMOUNT}


class ListSerializerSchema(OpenApiSerializerFieldExtension):
    """A list of nested objects (`many=True`) states the bounds DRF checks on it (`allow_empty`,
    `min_length`, `max_length`), which drf-spectacular leaves out."""

    target_class = "rest_framework.serializers.ListSerializer"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction == "request":
            min_items = max(self.target.min_length or 0, 0 if self.target.allow_empty else 1)
            if min_items:
                schema["minItems"] = min_items
            if self.target.max_length is not None:
                schema["maxItems"] = self.target.max_length
        return schema


class DecimalFieldSchema(OpenApiSerializerFieldExtension):
    """A decimal sent as a string: drf-spectacular's pattern allows "", "." and "-", which DRF refuses;
    this one wants a digit, no sign where the field takes nothing below zero, and a digit other than
    0 where it takes nothing below its smallest step (`min_value` above 0, "more than 0")."""

    target_class = "rest_framework.fields.DecimalField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        schema = auto_schema._map_serializer_field(field, direction, bypass_extensions=True)
        places = field.decimal_places
        if direction == "request" and "pattern" in schema and field.max_digits is not None and places is not None:
            whole = max(field.max_digits - places, 1)
            fraction = f"(?:\\.\\d{{1,{places}}})?" if places else ""
            if places and field.min_value is not None and 0 < field.min_value <= Decimal(1).scaleb(-places):
                # From 1 up, or 0.<at most `places` digits, the last not 0>.
                schema["pattern"] = f"^(?:[1-9]\\d{{0,{whole - 1}}}{fraction}|0\\.\\d{{0,{places - 1}}}[1-9])$"
            else:
                sign = "" if field.min_value is not None and field.min_value >= 0 else "-?"
                schema["pattern"] = f"^{sign}\\d{{1,{whole}}}{fraction}$"
        return schema


class ServiceBasicAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "merchant_platform.authentication_classes.ServiceBasicAuthentication"
    name = "serviceBasicAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "basic", "description": "Service-to-service calls (SERVICE_BASIC_AUTH_ACCOUNTS)."}


class JWTAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "merchant_platform.authentication_classes.JWTAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "An ES256 access token issued by identity."}


_ERROR_STATUSES = {
    "400": "Invalid input",
    "401": "Authentication required",
    "403": "Forbidden",
    "404": "Not found",
    "413": "Payload too large",
    "415": "Unsupported media type",
    "429": "Too many requests",
    "500": "Internal error",
}


def add_problem_responses(result, generator, request, public):
    """Postprocessing hook: declare the Problem schema and the error responses on every operation."""
    components = result.setdefault("components", {})
    components.setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    problem_ref = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for status_code, description in _ERROR_STATUSES.items():
                operation["responses"].setdefault(status_code, {"description": description, "content": problem_ref})
            # An error a view declares by its description only (409: OpenApiResponse(description=...)) is a problem too.
            for status_code, response in operation["responses"].items():
                if status_code[:1] in "45" and "content" not in response:
                    response["content"] = problem_ref
    return result


class LocalRedocView(SpectacularRedocView):
    """Redoc whose page loads nothing from a CDN (drf-spectacular's links Google Fonts)."""

    template_name = "merchant_platform/redoc.html"


def service_doc_urls(service, service_urls) -> list:
    """`<prefix>/doc/openapi.json` holding only this service's paths, and its interactive views."""
    urlconf = [path(service.prefix.lstrip("/") + "/", include(service_urls))]
    title = f"Merchant Platform: {service.name}"
    settings = {"TITLE": title, "VERSION": "v1"}
    schema_name = f"{service.name}-openapi"
    views = {
        # JSON whatever the Accept header says: the path promises openapi.json.
        "schema": SpectacularJSONAPIView.as_view(urlconf=urlconf, custom_settings=settings),
        "ui": SpectacularSwaggerView.as_view(url_name=schema_name, title=title),
        "redoc": LocalRedocView.as_view(url_name=schema_name, title=title),
    }
    routes = [
        path("doc/openapi.json", views["schema"], name=schema_name),
        path("doc/ui", views["ui"], name=f"{service.name}-doc-ui"),
        path("doc/redoc", views["redoc"], name=f"{service.name}-doc-redoc"),
    ]
    routes += [path(alias, views[kind], name=f"{service.name}-doc-{alias}") for alias, kind in service.doc_aliases]
    return routes
