"""Reads of licensing that are more than a one-line query."""

from __future__ import annotations

from functools import lru_cache

from django.db.models import CharField, FilteredRelation, Q, QuerySet, Value

from apps.licensing.models import Activation, License, LicenseEvent, Policy
from merchant_platform.errors import ApiError

DB = "licensing"


def policy_for_license(policy_id: int | None) -> Policy:
    """The given policy, or the seeded free trial when none is given."""
    policies = Policy.objects.using(DB)
    policy = policies.filter(pk=policy_id).first() if policy_id is not None else policies.filter(code=Policy.FREE_TRIAL_CODE).first()
    if policy is None:
        detail = "No policy has this id." if policy_id is not None else "The free-trial policy is not seeded; run the seeds."
        raise ApiError(detail, code="POLICY_NOT_FOUND", status_code=400)
    return policy


@lru_cache(maxsize=1024)
def policy_code(policy_id: int) -> str:
    """A policy's code. Codes never change (nothing can edit one), so a process remembers them and
    license answers need no join with the policies."""
    return Policy.all_objects.using(DB).values_list("code", flat=True).get(pk=policy_id)


def license_for_validation(*, fingerprint: str, license_id: int | None = None, key: str | None = None) -> License | None:
    """The license by id or key, with the fingerprint's seat, in one query."""
    if (license_id is None) == (key is None):
        raise ValueError("give exactly one of license_id and key")
    licenses_with_seat = with_seat(licenses(), fingerprint)
    return licenses_with_seat.filter(pk=license_id).first() if license_id is not None else licenses_with_seat.filter(key=key).first()


def with_seat(licenses: QuerySet[License], fingerprint: str) -> QuerySet[License]:
    """Licenses joined with the live seat of `fingerprint` (read back with `seat_of`)."""
    return licenses.annotate(
        seat=FilteredRelation("activations", condition=Q(activations__fingerprint=fingerprint, activations__deleted_at__isnull=True)),
        seat_fingerprint=Value(fingerprint, output_field=CharField()),
    ).select_related("seat")


def seat_of(license: License, fingerprint: str) -> Activation | None:
    """The fingerprint's live seat: from the join when `with_seat` read the license, else a query."""
    if getattr(license, "seat_fingerprint", None) == fingerprint:
        return getattr(license, "seat", None)  # the join leaves the attribute unset when no seat matched
    return live_activation(license_id=license.id, fingerprint=fingerprint)


def live_activation(*, license_id: int, fingerprint: str) -> Activation | None:
    return Activation.objects.using(DB).filter(license_id=license_id, fingerprint=fingerprint).first()


def licenses() -> QuerySet[License]:
    return License.objects.using(DB).order_by("-id")


def activations() -> QuerySet[Activation]:
    """Live seats of live licenses: a deleted license's seats are gone from the API with it."""
    return Activation.objects.using(DB).filter(license__deleted_at__isnull=True).order_by("-id")


def policies() -> QuerySet[Policy]:
    return Policy.objects.using(DB).order_by("code")


def license_events(license_id: int) -> QuerySet[LicenseEvent]:
    """The audit trail of a license, oldest first (no REST route exposes it, spec 4.4)."""
    return LicenseEvent.objects.using(DB).filter(license_id=license_id).order_by("id")
