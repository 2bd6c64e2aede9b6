"""The license lifecycle in the service layer: states, audit events, 409s on illegal transitions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.licensing import selectors, services
from apps.licensing.models import Activation, License, LicenseEvent, Policy
from apps.licensing.states import TRANSITIONS, LicenseAction, LicenseStatus, next_status
from merchant_platform.errors import ApiError, Conflict, NotFound

pytestmark = pytest.mark.django_db(databases="__all__")

ACTIONS = {
    LicenseAction.ACTIVATE: services.license_activate,
    LicenseAction.DEACTIVATE: services.license_deactivate,
    LicenseAction.SUSPEND: services.license_suspend,
    LicenseAction.REINSTATE: services.license_reinstate,
    LicenseAction.RENEW: services.license_renew,
    LicenseAction.REVOKE: services.license_revoke,
}


def event_types(license) -> list[str]:
    return list(selectors.license_events(license.id).values_list("type", flat=True))


def license_in(status: str, *, make_license) -> License:
    license = make_license(activate=False)
    License.objects.filter(pk=license.id).update(status=status)
    license.refresh_from_db()
    return license


def test_create_uses_the_free_trial_policy_and_audits(seeded):
    license = services.license_create(owner_id=77, name="Shop", actor="user:1")
    trial = Policy.objects.get(code=Policy.FREE_TRIAL_CODE)
    assert license.status == LicenseStatus.INACTIVE
    assert license.policy_id == trial.id
    assert license.activation_config == {"limit": trial.activation_limit}
    assert abs((license.expires_at - timezone.now()) - timedelta(seconds=trial.duration_seconds)) < timedelta(seconds=5)
    assert len(license.key) == 29
    event = LicenseEvent.objects.get(license=license)
    assert (event.type, event.actor) == ("created", "user:1")


def test_create_perpetual_and_explicit_limit(seeded):
    license = services.license_create(owner_id=1, perpetual=True, activation_limit=5)
    assert license.expires_at is None
    assert license.activation_limit == 5


def test_every_action_writes_its_event(make_license):
    license = make_license(activate=False)
    services.license_activate(license_id=license.id)
    services.license_suspend(license_id=license.id)
    services.license_reinstate(license_id=license.id)
    services.license_renew(license_id=license.id)
    services.license_deactivate(license_id=license.id)
    services.license_activate(license_id=license.id)
    final = services.license_revoke(license_id=license.id, actor="user:9")
    assert final.status == LicenseStatus.REVOKED
    assert event_types(license) == [
        "created",
        "activated",
        "suspended",
        "reinstated",
        "renewed",
        "deactivated",
        "activated",
        "revoked",
    ]
    revoked = LicenseEvent.objects.filter(license=license, type="revoked").get()
    assert revoked.data == {"from": "ACTIVATED", "to": "REVOKED"}
    assert revoked.actor == "user:9"


@pytest.mark.parametrize("action", list(LicenseAction))
@pytest.mark.parametrize("status", list(LicenseStatus))
def test_the_transition_table_is_enforced(action, status, make_license):
    license = license_in(status, make_license=make_license)
    target = next_status(action, status)
    events_before = LicenseEvent.objects.filter(license=license).count()
    if target is None:
        with pytest.raises(Conflict) as raised:
            ACTIONS[action](license_id=license.id)
        expected = "LICENSE_REVOKED" if status == LicenseStatus.REVOKED else "LICENSE_INVALID_TRANSITION"
        assert raised.value.code == expected
        assert raised.value.status_code == 409
        license.refresh_from_db()
        assert license.status == status
        assert LicenseEvent.objects.filter(license=license).count() == events_before
    else:
        assert ACTIONS[action](license_id=license.id).status == target
        assert LicenseEvent.objects.filter(license=license).count() == events_before + 1


def test_revoked_is_terminal():
    sources = [sources for sources, _ in TRANSITIONS.values()]
    assert all(LicenseStatus.REVOKED not in states for states in sources)


def test_renew_extends_by_the_policy_duration_from_the_current_expiry(make_license):
    license = make_license()
    before = license.expires_at
    renewed = services.license_renew(license_id=license.id)
    assert renewed.expires_at - before == timedelta(seconds=license.policy.duration_seconds)
    event = LicenseEvent.objects.get(license=license, type="renewed")
    assert event.data["previousExpiresAt"] == before.isoformat()


def test_renew_an_expired_license_counts_from_now(make_license):
    license = make_license(expires_at=timezone.now() - timedelta(days=3))
    License.objects.filter(pk=license.id).update(status=LicenseStatus.EXPIRED)
    renewed = services.license_renew(license_id=license.id)
    assert renewed.status == LicenseStatus.ACTIVATED
    expected = timezone.now() + timedelta(seconds=license.policy.duration_seconds)
    assert abs(renewed.expires_at - expected) < timedelta(seconds=5)


def test_renew_to_an_explicit_date_and_refusals(make_license):
    license = make_license()
    target = timezone.now() + timedelta(days=400)
    assert services.license_renew(license_id=license.id, expires_at=target).expires_at == target
    with pytest.raises(ApiError) as raised:
        services.license_renew(license_id=license.id, expires_at=timezone.now() - timedelta(seconds=1))
    assert raised.value.code == "EXPIRES_AT_IN_PAST"
    perpetual_policy = services.policy_create(code="PERPETUAL", name="Perpetual")
    perpetual = make_license(policy_id=perpetual_policy.id)
    with pytest.raises(Conflict) as raised:
        services.license_renew(license_id=perpetual.id)
    assert raised.value.code == "LICENSE_NOT_RENEWABLE"
    assert not LicenseEvent.objects.filter(license=perpetual, type="renewed").exists()


def test_deactivate_frees_every_seat(make_license):
    license = make_license(limit=3)
    for fingerprint in ("a", "b"):
        assert services.license_validate(license_id=license.id, fingerprint=fingerprint).valid
    services.license_deactivate(license_id=license.id)
    assert Activation.objects.filter(license=license).count() == 0
    assert LicenseEvent.objects.get(license=license, type="deactivated").data["releasedActivations"] == 2


def test_update_is_plain_crud_without_events(make_license):
    license = make_license()
    events = event_types(license)
    updated = services.license_update(license_id=license.id, name="Renamed", activation_limit=9, metadata={"plan": "x"})
    assert (updated.name, updated.activation_limit, updated.metadata, updated.status) == ("Renamed", 9, {"plan": "x"}, "ACTIVATED")
    assert event_types(license) == events


def test_unknown_license_is_not_found(seeded):
    with pytest.raises(NotFound):
        services.license_suspend(license_id=123)


def test_activation_create_bypasses_the_limit_and_delete_writes_no_event(make_license):
    license = make_license(limit=1)
    first = services.activation_create(license_id=license.id, fingerprint="one")
    services.activation_create(license_id=license.id, fingerprint="two")
    assert Activation.objects.filter(license=license).count() == 2
    with pytest.raises(Conflict) as raised:
        services.activation_create(license_id=license.id, fingerprint="one")
    assert raised.value.code == "ACTIVATION_EXISTS"
    events = event_types(license)
    services.activation_delete(activation_id=first.id)
    assert event_types(license) == events
    assert Activation.all_objects.get(pk=first.id).deleted_at is not None
    # The freed fingerprint may take a seat again.
    services.activation_create(license_id=license.id, fingerprint="one")


def test_license_events_are_append_only(make_license):
    from django.db import DatabaseError, transaction

    event = LicenseEvent.objects.filter(license=make_license()).first()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(using="licensing"):
        LicenseEvent.objects.filter(pk=event.pk).update(actor="forged")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(using="licensing"):
        event.hard_delete()


def test_policy_codes_are_unique(seeded):
    with pytest.raises(Conflict) as raised:
        services.policy_create(code=Policy.FREE_TRIAL_CODE, name="Again")
    assert raised.value.code == "POLICY_CODE_TAKEN"
