"""The request path's shared work (merchant_platform.middleware.ApiMiddleware and the request
signals of merchant_platform.db): what it must keep doing while it does it in fewer layers."""

from __future__ import annotations

import io

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connections, reset_queries
from django.db.backends.signals import connection_created
from django.urls import reverse

from merchant_platform.db import _release_opened_connections, alias_for_app, release_request_connections_only
from merchant_platform.middleware import service_first_urlconfs, service_prefix
from merchant_platform.registry import active_services
from tests.kernel.conftest import run_python
from tests.kernel.sample.models import Widget


def test_service_prefix_is_the_first_three_segments():
    assert service_prefix("/v1/api/outreach/inquiries/submit") == "/v1/api/outreach"
    assert service_prefix("/v1/api/outreach") == "/v1/api/outreach"
    assert service_prefix("/healthz") == "/healthz"


def test_each_service_resolves_through_a_variant_with_its_routes_first_and_every_other_route_kept():
    from merchant_platform import urls

    variants = service_first_urlconfs("merchant_platform.urls")
    assert set(variants) == {service.prefix for service in active_services()}
    for prefix, variant in variants.items():
        assert str(variant.urlpatterns[0].pattern) == prefix.lstrip("/") + "/"
        assert sorted(map(id, variant.urlpatterns)) == sorted(map(id, urls.urlpatterns))
        assert variant.handler404 is urls.handler404
        # reverse() inside a service's request sees the same names and paths as the root.
        assert reverse("outreach-healthz", urlconf=variant) == reverse("outreach-healthz")
        assert reverse("identity-healthz", urlconf=variant) == "/v1/api/identity/healthz"


@pytest.mark.django_db(databases="__all__")
def test_a_service_request_is_routed_through_its_variant(client):
    response = client.get("/v1/api/licensing/healthz")
    assert response.status_code == 200
    assert response.wsgi_request.urlconf is service_first_urlconfs("merchant_platform.urls")["/v1/api/licensing"]
    assert response.resolver_match.url_name == "licensing-healthz"
    assert not hasattr(client.get("/healthz").wsgi_request, "urlconf")


@pytest.mark.django_db(databases="__all__")
def test_an_unknown_path_under_a_service_prefix_is_a_404_problem(client):
    response = client.get("/v1/api/outreach/no-such-thing", HTTP_X_REQUEST_ID="req-404")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["requestId"] == "req-404"


@pytest.mark.django_db(databases="__all__")
def test_a_host_outside_allowed_hosts_is_a_400_problem_with_the_request_id(client, settings, log_lines):
    settings.ALLOWED_HOSTS = ["api.example.com"]
    response = client.get("/v1/api/outreach/healthz", HTTP_HOST="evil.example.net", HTTP_X_REQUEST_ID="req-host")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response["X-Request-Id"] == "req-host"
    assert log_lines.matching("event='request'", "requestId='req-host'", "status=400")
    assert client.get("/v1/api/outreach/healthz", HTTP_HOST="api.example.com").status_code == 200


@pytest.mark.django_db(databases="__all__")
def test_api_responses_carry_their_length_and_the_security_headers(client):
    response = client.get("/v1/api/outreach/healthz")
    assert response["Content-Length"] == str(len(response.content))
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


SIGNALS = (request_started, request_finished, connection_created)


@pytest.fixture
def django_receivers():
    """Django's own receivers, connected as Django connects them; the process's state afterwards."""
    saved = {signal: list(signal.receivers) for signal in SIGNALS}
    for signal in SIGNALS:
        signal.receivers = [entry for entry in signal.receivers if not str(entry[0][0]).startswith("merchant_platform.db.")]
        signal.sender_receivers_cache.clear()
    request_started.connect(reset_queries)
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
    yield
    for signal, receivers in saved.items():
        signal.receivers = receivers
        signal.sender_receivers_cache.clear()


def _receivers(signal) -> set:
    return {reference() for _, reference, *_ in signal.receivers}


@pytest.mark.parametrize(
    ("conn_max_age", "debug", "replaced"),
    [(0, False, True), (60, False, False), (None, False, False), (0, True, False)],
)
def test_django_connection_handling_is_replaced_only_when_no_connection_outlives_a_request(
    django_receivers, settings, conn_max_age, debug, replaced
):
    databases = {alias: {**config, "CONN_MAX_AGE": 0} for alias, config in settings.DATABASES.items()}
    databases["outreach"]["CONN_MAX_AGE"] = conn_max_age
    assert release_request_connections_only(databases, debug=debug) is replaced
    started, finished = _receivers(request_started), _receivers(request_finished)
    assert (close_old_connections in started) is not replaced
    assert (reset_queries in started) is not replaced
    assert (close_old_connections in finished) is not replaced
    assert (_release_opened_connections in finished) is replaced


def _call(handler: WSGIHandler, path: str) -> int:
    statuses = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
    }
    response = handler(environ, lambda status, headers, exc_info=None: statuses.append(status))
    b"".join(response)
    response.close()  # what a WSGI server does when the response is sent: request_finished
    return int(statuses[0].split()[0])


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_the_connections_a_request_opened_are_released_when_it_finishes(django_receivers, settings):
    """Through Django's real WSGI handler (the test client keeps connections open on purpose)."""
    settings.ROOT_URLCONF = "tests.kernel.urls"
    alias = alias_for_app(Widget._meta.app_label)
    other = next(name for name in settings.DATABASES if name not in (alias, "default"))
    assert release_request_connections_only(settings.DATABASES, debug=False)
    connections[alias].close()
    connections[other].ensure_connection()  # opened before the request, as a test does
    handler = WSGIHandler()
    for _ in range(2):
        assert _call(handler, "/kernel-test/widgets") == 200  # lists widgets through the alias
        assert connections[alias].connection is None
    assert connections[other].connection is not None
    assert _call(handler, "/v1/api/outreach/healthz") == 200  # opens nothing, releases nothing
    assert connections[other].connection is not None


def test_the_wsgi_module_keeps_what_its_import_built_out_of_the_collector():
    result = run_python("import gc, merchant_platform.wsgi; print(gc.get_freeze_count())")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) > 10_000  # every module, class and setting the import made


def test_a_websocket_handshake_on_a_path_nobody_serves_is_refused_not_a_500():
    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator

    from merchant_platform.asgi import application

    async def handshake():
        communicator = WebsocketCommunicator(application, "/stream/nowhere")
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    assert async_to_sync(handshake)() is False
