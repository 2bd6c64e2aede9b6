"""The service's OpenAPI document, interactive view, probes and optional Prometheus page (spec 4.1)."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from tests.outreach.conftest import SUBMIT, valid_inquiry

pytestmark = pytest.mark.django_db(databases="__all__")

PUBLIC = {
    ("post", "/v1/api/outreach/inquiries/submit"),
    ("post", "/v1/api/outreach/subscribers/subscribe"),
    ("post", "/v1/api/outreach/subscribers/confirm"),
    ("post", "/v1/api/outreach/subscribers/unsubscribe"),
}


@pytest.fixture(scope="module")
def document(django_db_blocker):
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/v1/api/outreach/doc/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_the_openapi_document_is_valid_and_lists_every_route(document):
    validate(document)
    operations = {(method, path) for path, item in document["paths"].items() for method in item}

    assert operations == PUBLIC | {
        ("get", "/v1/api/outreach/inquiries"),
        ("get", "/v1/api/outreach/inquiries/{id}"),
        ("patch", "/v1/api/outreach/inquiries/{id}"),
        ("delete", "/v1/api/outreach/inquiries/{id}"),
        ("get", "/v1/api/outreach/subscribers"),
        ("post", "/v1/api/outreach/subscribers"),
        ("get", "/v1/api/outreach/subscribers/{id}"),
        ("patch", "/v1/api/outreach/subscribers/{id}"),
        ("delete", "/v1/api/outreach/subscribers/{id}"),
        ("get", "/v1/api/outreach/statistics"),
    }


def test_public_operations_need_no_token_and_the_others_a_bearer_token(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            security = operation.get("security")
            if (method, path) in PUBLIC:
                assert security == [{}], (method, path)
            else:
                assert security == [{"bearerAuth": []}], (method, path)


def test_no_schema_has_a_token_field_except_the_token_inputs(document):
    schemas = document["components"]["schemas"]

    for name, schema in schemas.items():
        properties = set(schema.get("properties", {}))
        assert not {"tokenHash", "token_hash"} & properties, name
        if "token" in properties:
            assert name in {"ConfirmRequest", "UnsubscribeRequest"}, name
        if "unsubscribeToken" in properties:
            assert name == "UnsubscribeRequest", name
    assert set(schemas["Subscriber"]["properties"]) == {
        "id",
        "email",
        "name",
        "status",
        "confirmedAt",
        "unsubscribedAt",
        "createdAt",
        "updatedAt",
    }
    assert "InquiryStatusEnum" in schemas and "SubscriberStatusEnum" in schemas


def test_the_interactive_view_is_served_without_a_cdn(client):
    response = client.get("/v1/api/outreach/doc")

    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html and "/v1/api/outreach/doc/openapi.json" in html
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html


def test_probes(client):
    assert client.get("/v1/api/outreach/healthz").json() == {"status": "ok"}
    ready = client.get("/v1/api/outreach/readyz")
    assert ready.status_code == 200, ready.content
    assert set(ready.json()["checks"]) == {"database:outreach", "redis"}


def test_metrics_are_off_by_default(client):
    response = client.get("/metrics")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"


def test_metrics_in_prometheus_format_when_enabled(client, settings):
    settings.OUTREACH_METRICS_ENABLED = True

    def submitted() -> float:
        page = client.get("/metrics")
        assert page.status_code == 200
        assert page["Content-Type"].startswith("text/plain; version=")
        line = next(line for line in page.content.decode().splitlines() if line.startswith("outreach_inquiries_submitted_total "))
        return float(line.split()[1])

    before = submitted()
    assert client.post(SUBMIT, valid_inquiry(), content_type="application/json").status_code == 201

    assert submitted() == before + 1


def test_metrics_are_not_under_the_gateway_prefix(client, settings):
    settings.OUTREACH_METRICS_ENABLED = True

    assert client.get("/v1/api/outreach/metrics").status_code == 404
