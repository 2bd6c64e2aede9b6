"""Signal's probes and documents (spec 4.1, 8): /health (public, what the gateway checks every
30 s), /doc, /explorer, /openapi.json, plus the kernel's healthz/readyz."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db(databases="__all__")

PREFIX = "/v1/api/signal"


@pytest.fixture(scope="module")
def document(django_db_blocker):
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get(f"{PREFIX}/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_the_openapi_document_is_valid_and_lists_signal_s_routes_only(document):
    validate(document)
    operations = {(method, path) for path, item in document["paths"].items() for method in item}

    assert operations == {
        ("get", f"{PREFIX}/notifications"),
        ("get", f"{PREFIX}/notifications/{{id}}"),
        ("delete", f"{PREFIX}/notifications/{{id}}"),
        ("post", f"{PREFIX}/notifications/{{id}}/read"),
        ("post", f"{PREFIX}/notifications/read-all"),
        ("get", f"{PREFIX}/notifications/unread-count"),
        ("get", f"{PREFIX}/socket/websocket/clients"),
        ("get", f"{PREFIX}/socket/websocket/clients/status"),
    }
    for path, item in document["paths"].items():
        for operation in item.values():
            public = path.endswith("/clients/status")
            assert operation["security"] == ([{}] if public else [{"bearerAuth": []}]), path


@pytest.mark.parametrize("path", ["/health", "/healthz", "/readyz", "/doc", "/explorer", "/openapi.json", "/doc/openapi.json"])
def test_probes_and_documents_are_public(client, path):
    response = client.get(f"{PREFIX}{path}")

    assert response.status_code == 200, (path, response.content[:300])


def test_the_interactive_views_use_local_assets(client):
    for path in ("/doc", "/explorer"):
        page = client.get(f"{PREFIX}{path}").content.decode()
        assert "cdn" not in page.lower() and "unpkg" not in page.lower(), path
