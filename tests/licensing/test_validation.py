"""Validation by fingerprint: codes, lazy expiry, the seat limit under concurrency, and the
background lastValidatedAt write."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from apps.licensing import services
from apps.licensing.models import Activation, License, LicenseEvent
from apps.licensing.states import LicenseStatus, ValidationCode
from tests.support.waiting import wait_for

ALL = "__all__"


@pytest.mark.django_db(databases=ALL)
class TestCodes:
    def test_new_fingerprints_take_seats_until_the_limit(self, make_license):
        license = make_license(limit=2)
        first = services.license_validate(license_id=license.id, fingerprint="pos-1")
        assert (first.code, first.activation.fingerprint) == (ValidationCode.VALID, "pos-1")
        assert services.license_validate(license_id=license.id, fingerprint="pos-2").valid
        again = services.license_validate(license_id=license.id, fingerprint="pos-1")
        assert again.valid and again.activation.id == first.activation.id
        third = services.license_validate(license_id=license.id, fingerprint="pos-3")
        assert third.code == ValidationCode.TOO_MANY_ACTIVATIONS
        assert third.activation is None
        assert Activation.objects.filter(license=license).count() == 2

    def test_a_freed_seat_can_be_taken(self, make_license):
        license = make_license(limit=1)
        seat = services.license_validate(license_id=license.id, fingerprint="old").activation
        services.activation_delete(activation_id=seat.id)
        assert services.license_validate(license_id=license.id, fingerprint="new").valid

    def test_unknown_fingerprint_without_taking_a_seat(self, make_license):
        license = make_license()
        result = services.license_validate(license_id=license.id, fingerprint="x", take_seat=False)
        assert result.code == ValidationCode.UNKNOWN_FINGERPRINT
        assert not Activation.objects.filter(license=license).exists()

    @pytest.mark.parametrize(
        ("status", "code"),
        [
            (LicenseStatus.INACTIVE, ValidationCode.INACTIVE),
            (LicenseStatus.SUSPENDED, ValidationCode.SUSPENDED),
            (LicenseStatus.EXPIRED, ValidationCode.EXPIRED),
            (LicenseStatus.REVOKED, ValidationCode.REVOKED),
        ],
    )
    def test_a_license_that_is_not_activated(self, status, code, make_license):
        license = make_license()
        License.objects.filter(pk=license.id).update(status=status)
        result = services.license_validate(license_id=license.id, fingerprint="pos")
        assert result.code == code and not result.valid
        assert not Activation.objects.filter(license=license).exists()

    def test_by_key(self, make_license):
        license = make_license()
        assert services.license_validate(key=license.key, fingerprint="pos").valid
        assert services.license_validate(key="NOPE-NOPE", fingerprint="pos").code == ValidationCode.NOT_FOUND

    def test_lazy_expiry_flips_and_audits_once(self, make_license):
        license = make_license(expires_at=timezone.now() - timedelta(seconds=1))
        assert License.objects.get(pk=license.id).status == LicenseStatus.ACTIVATED  # nothing flips it in the background
        first = services.license_validate(license_id=license.id, fingerprint="pos")
        second = services.license_validate(license_id=license.id, fingerprint="pos")
        assert first.code == second.code == ValidationCode.EXPIRED
        assert License.objects.get(pk=license.id).status == LicenseStatus.EXPIRED
        expired = LicenseEvent.objects.filter(license=license, type="expired")
        assert expired.count() == 1
        assert expired.get().actor == "system"
        assert not Activation.objects.filter(license=license).exists()

    def test_validation_writes_no_event(self, make_license):
        license = make_license()
        before = LicenseEvent.objects.filter(license=license).count()
        services.license_validate(license_id=license.id, fingerprint="pos")
        assert LicenseEvent.objects.filter(license=license).count() == before


@pytest.mark.django_db(databases=ALL, transaction=True)
def test_parallel_validations_never_exceed_the_limit(make_license):
    limit, callers = 3, 24
    license = make_license(limit=limit)
    start = threading.Barrier(callers)

    def validate(index: int) -> str:
        try:
            start.wait()
            return services.license_validate(license_id=license.id, fingerprint=f"machine-{index}").code
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=callers) as pool:
        codes = list(pool.map(validate, range(callers)))
    assert codes.count(ValidationCode.VALID) == limit
    assert codes.count(ValidationCode.TOO_MANY_ACTIVATIONS) == callers - limit
    assert Activation.objects.filter(license=license).count() == limit


@pytest.mark.django_db(databases=ALL, transaction=True)
def test_parallel_validations_of_one_new_fingerprint_take_one_seat(make_license):
    license = make_license(limit=5)
    start = threading.Barrier(8)

    def validate(_):
        try:
            start.wait()
            return services.license_validate(license_id=license.id, fingerprint="same").activation.id
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=8) as pool:
        seats = set(pool.map(validate, range(8)))
    assert len(seats) == 1
    assert Activation.objects.filter(license=license).count() == 1


@pytest.mark.django_db(databases=ALL, transaction=True)
def test_parallel_expiry_is_audited_once(make_license):
    license = make_license(expires_at=timezone.now() - timedelta(seconds=1))
    start = threading.Barrier(6)

    def validate(index):
        try:
            start.wait()
            return services.license_validate(license_id=license.id, fingerprint=f"m{index}").code
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert set(pool.map(validate, range(6))) == {ValidationCode.EXPIRED}
    assert LicenseEvent.objects.filter(license=license, type="expired").count() == 1


@pytest.mark.django_db(databases=ALL, transaction=True)
def test_last_validated_at_is_written_without_making_the_caller_wait(make_license):
    license = make_license()
    services.license_validate(license_id=license.id, fingerprint="pos")  # the seat exists from now on
    wait_for(lambda: License.objects.get(pk=license.id).last_validated_at)
    locked, release = threading.Event(), threading.Event()

    def hold_row_lock():
        # Another transaction holds the license row: the background UPDATE must wait for it.
        with transaction.atomic(using="licensing"):
            License.objects.select_for_update().get(pk=license.id)
            locked.set()
            release.wait(10)
        connections.close_all()

    holder = threading.Thread(target=hold_row_lock)
    holder.start()
    try:
        assert locked.wait(5)
        before = License.objects.get(pk=license.id).last_validated_at
        started = time.monotonic()
        result = services.license_validate(license_id=license.id, fingerprint="pos")
        assert result.valid
        assert time.monotonic() - started < 5.0  # answered while the write is blocked (it is held for 10 s)
        time.sleep(0.2)
        assert License.objects.get(pk=license.id).last_validated_at == before
    finally:
        release.set()
        holder.join()
    assert wait_for(lambda: License.objects.get(pk=license.id).last_validated_at > before)


@pytest.mark.django_db(databases=ALL, transaction=True)
def test_a_failed_last_validated_write_is_logged_not_raised(make_license, caplog):
    license = make_license()
    services.license_validate(license_id=license.id, fingerprint="pos")
    wait_for(lambda: License.objects.get(pk=license.id).last_validated_at)
    before = License.objects.get(pk=license.id).last_validated_at
    # A real database failure: a trigger refuses any write of last_validated_at.
    with connections["licensing"].cursor() as cursor:
        cursor.execute(
            """
            CREATE FUNCTION test_refuse_last_validated() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'last_validated_at refused by the test'; END $$;
            CREATE TRIGGER test_refuse_last_validated BEFORE UPDATE OF last_validated_at ON licensing_license
                FOR EACH ROW EXECUTE FUNCTION test_refuse_last_validated();
            """
        )
    try:
        with caplog.at_level("ERROR"):
            assert services.license_validate(license_id=license.id, fingerprint="pos").valid
            wait_for(lambda: any("licensing.last_validated_failed" in str(r.msg) for r in caplog.records))
        assert License.objects.get(pk=license.id).last_validated_at == before
    finally:
        with connections["licensing"].cursor() as cursor:
            cursor.execute("DROP TRIGGER test_refuse_last_validated ON licensing_license; DROP FUNCTION test_refuse_last_validated();")
    # The next validation writes it again.
    services.license_validate(license_id=license.id, fingerprint="pos")
    wait_for(lambda: License.objects.get(pk=license.id).last_validated_at > before)


@pytest.mark.django_db(databases=ALL)
def test_a_stale_read_answers_with_the_current_status(make_license):
    license = make_license(expires_at=timezone.now() - timedelta(seconds=1))
    stale = License.objects.select_related("policy").get(pk=license.id)
    services.license_suspend(license_id=license.id)
    result = services.license_validate(license=stale, fingerprint="pos")
    assert result.code == ValidationCode.SUSPENDED
    assert not LicenseEvent.objects.filter(license=license, type="expired").exists()


@pytest.mark.django_db(databases=ALL)
def test_last_validated_at_never_moves_back(make_license, monkeypatch):
    from apps.licensing import last_validated

    monkeypatch.setattr(last_validated, "UPDATE_CHUNK", 2)  # three licenses: two UPDATEs
    licenses = [make_license() for _ in range(3)]
    later = timezone.now()
    assert last_validated.write_last_validated({license.id: later for license in licenses}) == 3
    assert last_validated.write_last_validated({licenses[0].id: later - timedelta(minutes=5)}) == 0
    assert {License.objects.get(pk=license.id).last_validated_at for license in licenses} == {later}
