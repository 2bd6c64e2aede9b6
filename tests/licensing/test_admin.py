"""The Django admin (all-in-one topology): read-only records; lifecycle changes and deletes go
through the service functions, so they audit and re-publish or withdraw the certificate."""

from __future__ import annotations

import pytest

from apps.licensing import selectors
from apps.licensing.models import Activation, License, LicenseEvent
from apps.licensing.states import LicenseEventType, LicenseStatus
from merchant_platform import licenses

pytestmark = pytest.mark.django_db(databases="__all__")


def _raw(license_id: int):
    from django_redis import get_redis_connection

    return get_redis_connection("default").get(licenses.certificate_cache_key(license_id))


def test_licenses_are_shown_read_only(admin_client, make_license):
    license = make_license()

    page = admin_client.get(f"/admin/licensing/license/{license.id}/change/")

    assert page.status_code == 200 and str(license.owner_id).encode() in page.content
    assert b'name="expires_at"' not in page.content and b'name="merchant_id"' not in page.content
    assert admin_client.get("/admin/licensing/license/add/").status_code == 403
    assert admin_client.post(f"/admin/licensing/license/{license.id}/change/", {"name": "x"}).status_code == 403


def test_a_lifecycle_action_audits_and_republishes(admin_client, admin_user, make_license, on_commit):
    with on_commit():
        license = make_license()
    assert _raw(license.id) is not None

    with on_commit():
        response = admin_client.post("/admin/licensing/license/", {"action": "suspend", "_selected_action": [license.id]})

    assert response.status_code == 302
    license.refresh_from_db()
    assert license.status == LicenseStatus.SUSPENDED
    event = LicenseEvent.objects.filter(license=license).order_by("-id").first()
    assert (event.type, event.actor) == (LicenseEventType.SUSPENDED, f"user:{admin_user.pk}")
    assert licenses.read_license(license.id)["status"] == LicenseStatus.SUSPENDED


def test_an_action_the_state_machine_forbids_is_reported_not_applied(admin_client, make_license):
    license = make_license(activate=False)

    response = admin_client.post("/admin/licensing/license/", {"action": "reinstate", "_selected_action": [license.id]}, follow=True)

    assert b"Not changed" in response.content
    license.refresh_from_db()
    assert license.status == LicenseStatus.INACTIVE


def test_deleting_a_license_is_soft_and_withdraws_its_certificate(admin_client, make_license, on_commit):
    with on_commit():
        license = make_license()
    assert _raw(license.id) is not None

    with on_commit():
        admin_client.post("/admin/licensing/license/", {"action": "delete_selected", "_selected_action": [license.id], "post": "yes"})

    assert not License.objects.filter(pk=license.id).exists()
    assert License.all_objects.get(pk=license.id).deleted_at is not None
    assert _raw(license.id) is None


def test_freeing_a_seat_goes_through_the_service(admin_client, make_license):
    license = make_license()
    seat = Activation.objects.create(license=license, fingerprint="fp-1")

    admin_client.post(f"/admin/licensing/activation/{seat.id}/delete/", {"post": "yes"})

    assert selectors.live_activation(license_id=license.id, fingerprint="fp-1") is None
    assert Activation.all_objects.get(pk=seat.id).deleted_at is not None
