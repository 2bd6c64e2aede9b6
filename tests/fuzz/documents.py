"""What both schema fuzzing tests share: every service's OpenAPI document (read from the WSGI
application in-process), the bound on generated requests, and the checks each answer must pass."""

from __future__ import annotations

import schemathesis
from django.core.wsgi import get_wsgi_application
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance, status_code_conformance

from merchant_platform.registry import active_services

# The examples of the documents and a bounded number of generated requests per operation
# (MAX_EXAMPLES); the coverage phase is left out: it sends every boundary case of every parameter,
# unbounded, which takes minutes per service.
PHASES = ["examples", "fuzzing"]
MAX_EXAMPLES = 5
PROBLEM_MEMBERS = {"type": str, "title": str, "status": int, "code": str, "detail": str}


def wsgi_schemas() -> dict:
    """Each service's document as schemathesis reads it, calling the WSGI application in-process."""
    app = get_wsgi_application()
    schemas = {
        service.name: schemathesis.openapi.from_wsgi(f"{service.prefix}/doc/openapi.json", app)
        for service in active_services()
        if service.openapi
    }
    for schema in schemas.values():
        schema.config.phases.update(phases=PHASES)
    return schemas


def http_schemas() -> dict:
    """The same documents, for calls over HTTP (each test gives the base URL)."""
    schemas = {name: schemathesis.openapi.from_dict(schema.raw_schema) for name, schema in wsgi_schemas().items()}
    for schema in schemas.values():
        schema.config.phases.update(phases=PHASES)
    return schemas


def problem_shape(ctx, response, case):
    """An error answer is application/problem+json carrying the shared members, its status repeated."""
    if response.status_code < 400:
        return None
    assert response.headers.get("content-type", [""])[0].startswith("application/problem+json"), response.headers
    body = response.json()
    for member, kind in PROBLEM_MEMBERS.items():
        assert isinstance(body.get(member), kind), (member, body)
    assert body["status"] == response.status_code, body
    return None


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance, problem_shape]
