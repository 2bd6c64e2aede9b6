"""OpenAPI helpers: the shared problem shape in every document, and one document per service."""

from __future__ import annotations

from django.urls import include, path
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularRedocView, SpectacularSwaggerView

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


class SnowflakeFieldSchema(OpenApiSerializerFieldExtension):
    """Snowflake ids (and references to them) are strings in JSON, whatever the model field says."""

    target_class = "merchant_platform.serializers.SnowflakeField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        return dict(SNOWFLAKE_SCHEMA)


class SnowflakeRelatedFieldSchema(SnowflakeFieldSchema):
    target_class = "merchant_platform.serializers.SnowflakeRelatedField"


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
