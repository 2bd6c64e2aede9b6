"""The license middleware and each service's license gate (spec 2.4 and 7; docs/services/licensing.md,
"The license gate"): `request.license` is the presented license's payload or None, and the gate serves,
warns or refuses. Licensing's own routes stand in for any service: the gate runs before authentication,
so an unauthenticated request that passes it gets the route's 401."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from django_redis import get_redis_connection

from apps.licensing import services
from apps.licensing.models import License
from merchant_platform import licenses
from merchant_platform.middleware import LicenseMiddleware
from tests.kernel.conftest import run_python
from tests.support.auth import service_headers

ALL = "__all__"
LICENSES = "/v1/api/licensing/licenses"
PROBE = "/v1/api/licensing/healthz"


@pytest.fixture
def published(make_license, on_commit):
    with on_commit():
        license = make_license(merchant_id=555)
    return License.objects.get(pk=license.id)


def presenting(license: License, key: str | None = None) -> dict:
    return {"HTTP_LICENSE_ID": str(license.id), "HTTP_LICENSE_KEY": key if key is not None else license.key}


@pytest.fixture
def gate(settings):
    def set_mode(mode: str) -> None:
        settings.LICENSE_GATES = {**settings.LICENSE_GATES, "licensing": mode}

    return set_mode


def logged(caplog, event: str, *fields: str) -> list[dict]:
    """The structured log events named `event`, with the given fields (all but the standard ones by default)."""
    events = [record.msg for record in caplog.records if isinstance(record.msg, dict) and record.msg.get("event") == event]
    standard = {"event", "level", "logger", "ts", "requestId"}
    return [{k: v for k, v in e.items() if (k in fields if fields else k not in standard)} for e in events]


def seen_license(**headers):
    """What the middleware puts on a request with these headers."""
    seen = {}

    def view(request):
        seen["license"] = request.license
        return HttpResponse()

    LicenseMiddleware(view)(RequestFactory().get(LICENSES, **headers))
    return seen["license"]


@pytest.mark.django_db(databases=ALL)
class TestTheMiddleware:
    def test_a_license_presented_with_its_key_is_the_requests_license(self, published):
        payload = seen_license(**presenting(published))

        assert payload["licenseId"] == str(published.id) and payload["status"] == "ACTIVATED"
        assert payload["keyDigest"] == licenses.key_digest(published.key)

    def test_nothing_presented_is_none(self, published):
        assert seen_license() is None
        assert seen_license(HTTP_LICENSE_ID=str(published.id)) is None

    def test_the_id_with_another_key_is_none_and_logged(self, published, caplog):
        assert seen_license(**presenting(published, key="0000-0000-0000-0000-00000")) is None
        assert logged(caplog, "license.key_mismatch") == [{"licenseId": str(published.id)}]

    @pytest.mark.parametrize("license_id", ["abc", "-1", "1" * 21, "1 OR 1=1"])
    def test_a_malformed_id_is_none(self, published, license_id):
        assert seen_license(HTTP_LICENSE_ID=license_id, HTTP_LICENSE_KEY=published.key) is None

    def test_a_missing_certificate_is_none(self, published):
        get_redis_connection("default").delete(licenses.certificate_cache_key(published.id))

        assert seen_license(**presenting(published)) is None


@pytest.mark.django_db(databases=ALL)
class TestTheGate:
    def test_off_decides_nothing(self, client, gate):
        gate("off")

        assert client.get(LICENSES).status_code == 401

    def test_enforce_refuses_a_request_without_a_license(self, client, gate):
        gate("enforce")

        response = client.get(LICENSES)

        assert response.status_code == 403
        assert response.json()["code"] == "LICENSE_REQUIRED"

    def test_enforce_serves_a_license_in_force(self, client, gate, published):
        gate("enforce")

        assert client.get(LICENSES, **presenting(published)).status_code == 401

    def test_enforce_refuses_unknown(self, client, gate, published):
        """Null means unknown, and under enforce unknown is refused: nothing proves the license."""
        gate("enforce")

        wrong_key = client.get(LICENSES, **presenting(published, key="0000-0000-0000-0000-00000"))
        get_redis_connection("default").delete(licenses.certificate_cache_key(published.id))
        no_certificate = client.get(LICENSES, **presenting(published))

        assert wrong_key.status_code == no_certificate.status_code == 403
        assert wrong_key.json()["code"] == no_certificate.json()["code"] == "LICENSE_UNKNOWN"

    def test_enforce_refuses_a_suspended_license(self, client, gate, published, on_commit):
        gate("enforce")
        with on_commit():
            services.license_suspend(license_id=published.id)

        response = client.get(LICENSES, **presenting(published))

        assert response.status_code == 403
        assert response.json()["code"] == "LICENSE_NOT_IN_FORCE"

    def test_warn_serves_and_logs(self, client, gate, caplog):
        gate("warn")

        response = client.get(LICENSES)

        assert response.status_code == 401
        assert logged(caplog, "license.gate", "mode", "outcome") == [{"mode": "warn", "outcome": "missing"}]

    def test_probes_and_the_services_own_calls_are_never_gated(self, client, gate):
        gate("enforce")

        assert client.get(PROBE).status_code == 200
        assert client.get(LICENSES, **service_headers()).status_code != 403

    def test_wrong_service_credentials_do_not_pass_the_gate(self, client, gate):
        gate("enforce")

        response = client.get(LICENSES, HTTP_AUTHORIZATION="Basic cGxhdGZvcm06d3Jvbmc=")

        assert response.status_code == 403
        assert response.json()["code"] == "LICENSE_REQUIRED"

    def test_another_services_gate_leaves_this_one_alone(self, client, settings):
        settings.LICENSE_GATES = {**settings.LICENSE_GATES, "commerce": "enforce"}

        assert client.get(LICENSES).status_code == 401


def test_an_unknown_gate_mode_stops_the_process_naming_the_variable():
    result = run_python("import django; django.setup()", COMMERCE_LICENSE_GATE="strict")

    assert result.returncode == 1
    assert "COMMERCE_LICENSE_GATE must be one of off, warn, enforce, got 'strict'" in result.stderr
