"""Every write of licensing: policies, the license lifecycle, validation, activation seats.

Lifecycle actions follow apps/licensing/states.py and write their LicenseEvent in the same
transaction; every action (and expiry) re-publishes the certificate after the commit, PATCH does not
(spec 4.4). `actor` names who acted in the audit trail ("user:<id>", "service:<name>", "system").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from apps.licensing import selectors
from apps.licensing.certificates import publish_on_commit
from apps.licensing.last_validated import recorder
from apps.licensing.models import Activation, License, LicenseEvent, Policy
from apps.licensing.states import (
    CODE_OF_STATUS,
    EVENT_OF_ACTION,
    LicenseAction,
    LicenseEventType,
    LicenseStatus,
    ValidationCode,
    next_status,
)
from merchant_platform.errors import ApiError, Conflict, NotFound

DB = "licensing"
SYSTEM = "system"


# Policies -----------------------------------------------------------------------------------------


def policy_create(
    *,
    code: str,
    name: str,
    duration_seconds: int | None = None,
    activation_limit: int = 1,
    entitlements: list[str] | None = None,
    is_trial: bool = False,
    created_by: int | None = None,
) -> Policy:
    taken = Conflict(f"A policy with code {code!r} exists.", code="POLICY_CODE_TAKEN")
    if Policy.all_objects.using(DB).filter(code=code).exists():
        raise taken
    try:
        with transaction.atomic(using=DB):
            return Policy.objects.using(DB).create(
                code=code,
                name=name,
                duration_seconds=duration_seconds,
                activation_limit=activation_limit,
                entitlements=entitlements or [],
                is_trial=is_trial,
                created_by=created_by,
            )
    except IntegrityError:  # a parallel create took the code between the check and the insert
        raise taken from None


def policy_update(*, policy_id: int, **fields) -> Policy:
    allowed = {"name", "duration_seconds", "activation_limit", "entitlements", "is_trial"}
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"policy_update cannot change {sorted(unknown)}")
    with transaction.atomic(using=DB):
        policy = _locked(Policy, policy_id)
        for name, value in fields.items():
            setattr(policy, name, value)
        policy.save(using=DB, update_fields=[*fields, "updated_at"])
        return policy


# Licenses: create, plain updates, delete ---------------------------------------------------------


def license_create(
    *,
    owner_id: int,
    merchant_id: int | None = None,
    policy_id: int | None = None,
    name: str = "",
    expires_at: datetime | None = None,
    perpetual: bool = False,
    activation_limit: int | None = None,
    entitlements: list[str] | None = None,
    metadata: dict | None = None,
    created_by: int | None = None,
    actor: str = SYSTEM,
) -> License:
    """A new INACTIVE license; the policy gives the defaults of expiry and seat limit.

    Without `expires_at` the license expires one policy duration from now, or never when the policy
    has no duration or `perpetual` is set."""
    with transaction.atomic(using=DB):
        policy = selectors.policy_for_license(policy_id)
        if expires_at is None and not perpetual and policy.duration_seconds:
            expires_at = timezone.now() + timedelta(seconds=policy.duration_seconds)
        license = License.objects.using(DB).create(
            owner_id=owner_id,
            merchant_id=merchant_id,
            policy=policy,
            name=name,
            expires_at=expires_at,
            activation_config={"limit": policy.activation_limit if activation_limit is None else activation_limit},
            entitlements=entitlements or [],
            metadata=metadata or {},
            created_by=created_by,
        )
        _audit(license, LicenseEventType.CREATED, actor, {"policy": policy.code, "status": license.status})
        publish_on_commit(license.id)
    return license


def license_update(*, license_id: int, **fields) -> License:
    """Plain CRUD (PATCH): no state change, no audit event, no certificate re-publication."""
    allowed = {"name", "owner_id", "merchant_id", "expires_at", "activation_limit", "entitlements", "metadata"}
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"license_update cannot change {sorted(unknown)}")
    with transaction.atomic(using=DB):
        license = _locked(License, license_id)
        if "activation_limit" in fields:
            license.activation_config = {**license.activation_config, "limit": fields.pop("activation_limit")}
            fields["activation_config"] = license.activation_config
        for name, value in fields.items():
            setattr(license, name, value)
        license.save(using=DB, update_fields=[*fields, "updated_at"])
    return license


def license_delete(*, license_id: int) -> None:
    """Soft delete; its certificate is withdrawn so consumers read null."""
    with transaction.atomic(using=DB):
        license = _locked(License, license_id)
        license.certificate_version += 1
        license.deleted_at = timezone.now()
        license.save(using=DB, update_fields=["deleted_at", "certificate_version", "updated_at"])
        publish_on_commit(license.id)  # withdraws it: consumers read null


# Licenses: lifecycle actions ----------------------------------------------------------------------


def license_activate(*, license_id: int, actor: str = SYSTEM) -> License:
    return _transition(license_id=license_id, action=LicenseAction.ACTIVATE, actor=actor)


def license_deactivate(*, license_id: int, actor: str = SYSTEM) -> License:
    """ACTIVATED -> INACTIVE, freeing every seat (the event records how many)."""

    def free_seats(license: License, data: dict) -> list[str]:
        data["releasedActivations"] = Activation.objects.using(DB).filter(license=license).delete()
        return []

    return _transition(license_id=license_id, action=LicenseAction.DEACTIVATE, actor=actor, apply=free_seats)


def license_suspend(*, license_id: int, actor: str = SYSTEM) -> License:
    return _transition(license_id=license_id, action=LicenseAction.SUSPEND, actor=actor)


def license_reinstate(*, license_id: int, actor: str = SYSTEM) -> License:
    return _transition(license_id=license_id, action=LicenseAction.REINSTATE, actor=actor)


def license_renew(*, license_id: int, expires_at: datetime | None = None, actor: str = SYSTEM) -> License:
    """Back to ACTIVATED with a later expiry: `expires_at` when given, else one policy duration
    past the current expiry (or past now, when that is already behind us)."""
    now = timezone.now()
    if expires_at is not None and expires_at <= now:
        raise ApiError("expiresAt must be in the future.", code="EXPIRES_AT_IN_PAST", status_code=400)

    def extend(license: License, data: dict) -> list[str]:
        if expires_at is not None:
            new_expiry = expires_at
        elif license.policy.duration_seconds:
            base = max(now, license.expires_at) if license.expires_at else now
            new_expiry = base + timedelta(seconds=license.policy.duration_seconds)
        else:
            raise Conflict(
                "The license's policy has no duration; give expiresAt to renew it.",
                code="LICENSE_NOT_RENEWABLE",
                extra={"licenseId": str(license.id)},
            )
        data["previousExpiresAt"] = license.expires_at.isoformat() if license.expires_at else None
        data["expiresAt"] = new_expiry.isoformat()
        license.expires_at = new_expiry
        return ["expires_at"]

    return _transition(license_id=license_id, action=LicenseAction.RENEW, actor=actor, apply=extend)


def license_revoke(*, license_id: int, actor: str = SYSTEM) -> License:
    return _transition(license_id=license_id, action=LicenseAction.REVOKE, actor=actor)


def _transition(*, license_id: int, action: LicenseAction, actor: str, apply=None) -> License:
    with transaction.atomic(using=DB):
        license = License.objects.using(DB).select_for_update(of=("self",)).select_related("policy").filter(pk=license_id).first()
        if license is None:
            raise NotFound("No license has this id.")
        previous = license.status
        target = next_status(action, previous)
        if target is None:
            raise _illegal(license, action)
        data = {"from": previous, "to": target}
        changed = apply(license, data) if apply else []
        license.status = target
        license.certificate_version += 1
        license.save(using=DB, update_fields=["status", *changed, "certificate_version", "updated_at"])
        _audit(license, EVENT_OF_ACTION[action], actor, data)
        publish_on_commit(license.id)
    return license


def _illegal(license: License, action: LicenseAction) -> Conflict:
    extra = {"licenseId": str(license.id), "licenseStatus": license.status, "action": action.value}
    if license.status == LicenseStatus.REVOKED:
        return Conflict("The license is revoked; no action applies to it any more.", code="LICENSE_REVOKED", extra=extra)
    return Conflict(f"A license in status {license.status} cannot {action.value}.", code="LICENSE_INVALID_TRANSITION", extra=extra)


# Validation ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidationResult:
    code: ValidationCode
    license: License | None = None
    activation: Activation | None = None

    @property
    def valid(self) -> bool:
        return self.code == ValidationCode.VALID


def license_validate(
    *,
    fingerprint: str,
    license: License | None = None,
    license_id: int | None = None,
    key: str | None = None,
    take_seat: bool = True,
    created_by: int | None = None,
) -> ValidationResult:
    """Check the license and the fingerprint's seat; a new fingerprint takes a free seat.

    A known fingerprint is answered without a lock or a write. A new one takes the license row lock,
    so parallel validations never hold more seats than `limit`. An ACTIVATED license past expiresAt
    becomes EXPIRED here and `expired` is audited (expiry is lazy, spec 3.2). lastValidatedAt is
    recorded in the background. Give the license (ideally read through selectors.with_seat, so the
    seat came in the same query), its id or its key.
    """
    if license is None:
        license = selectors.license_for_validation(fingerprint=fingerprint, license_id=license_id, key=key)
    if license is None:
        if key is not None:
            return ValidationResult(ValidationCode.NOT_FOUND)
        raise NotFound("No license has this id.")
    now = timezone.now()
    recorder.record(license.id, now)
    if _expiry_due(license, now):
        with transaction.atomic(using=DB):
            _expire(license, now)
    if license.status != LicenseStatus.ACTIVATED:
        return ValidationResult(CODE_OF_STATUS[license.status], license)
    activation = selectors.seat_of(license, fingerprint)
    if activation is not None:
        return ValidationResult(ValidationCode.VALID, license, activation)
    if not take_seat:
        return ValidationResult(ValidationCode.UNKNOWN_FINGERPRINT, license)
    return _take_seat(license, fingerprint=fingerprint, now=now, created_by=created_by)


def _expiry_due(license: License, now: datetime) -> bool:
    return license.status == LicenseStatus.ACTIVATED and license.expires_at is not None and license.expires_at <= now


def _expire(license: License, now: datetime) -> None:
    """ACTIVATED -> EXPIRED once: only the validation whose conditional update wins audits it."""
    flipped = (
        License.objects.using(DB)
        .filter(pk=license.id, status=LicenseStatus.ACTIVATED, expires_at__lte=now)
        .update(status=LicenseStatus.EXPIRED, certificate_version=F("certificate_version") + 1, updated_at=now)
    )
    if flipped:
        license.status = LicenseStatus.EXPIRED
        _audit(license, LicenseEventType.EXPIRED, SYSTEM, {"from": LicenseStatus.ACTIVATED, "to": LicenseStatus.EXPIRED})
        publish_on_commit(license.id)
    else:
        # Another writer got there first (an expiry, or an action): answer with what it left.
        license.refresh_from_db(using=DB, fields=["status", "expires_at"])


def _take_seat(license: License, *, fingerprint: str, now: datetime, created_by: int | None) -> ValidationResult:
    with transaction.atomic(using=DB):
        locked = License.objects.using(DB).select_for_update().filter(pk=license.id).first()
        if locked is None:
            raise NotFound("No license has this id.")
        if _expiry_due(locked, now):
            _expire(locked, now)
        if locked.status != LicenseStatus.ACTIVATED:
            return ValidationResult(CODE_OF_STATUS[locked.status], locked)
        # Another validation of this fingerprint may have taken the seat while we waited for the lock.
        activation = selectors.live_activation(license_id=locked.id, fingerprint=fingerprint)
        if activation is not None:
            return ValidationResult(ValidationCode.VALID, locked, activation)
        if Activation.objects.using(DB).filter(license_id=locked.id).count() >= locked.activation_limit:
            return ValidationResult(ValidationCode.TOO_MANY_ACTIVATIONS, locked)
        try:
            with transaction.atomic(using=DB):
                activation = Activation.objects.using(DB).create(license=locked, fingerprint=fingerprint, created_by=created_by)
        except IntegrityError:
            # POST /activations (which takes no lock) seated this fingerprint meanwhile.
            activation = selectors.live_activation(license_id=locked.id, fingerprint=fingerprint)
        return ValidationResult(ValidationCode.VALID, locked, activation)


# Activations (operator tools) ---------------------------------------------------------------------


def activation_create(
    *, license_id: int, fingerprint: str, name: str = "", metadata: dict | None = None, created_by: int | None = None
) -> Activation:
    """A seat created directly: bypasses the locked limit check (spec 4.4); validate enforces it."""
    with transaction.atomic(using=DB):
        license = License.objects.using(DB).filter(pk=license_id).first()
        if license is None:
            raise NotFound("No license has this id.")  # the answer to another tenant's license too (views)
        try:
            with transaction.atomic(using=DB):
                return Activation.objects.using(DB).create(
                    license=license, fingerprint=fingerprint, name=name, metadata=metadata or {}, created_by=created_by
                )
        except IntegrityError:
            raise Conflict("This fingerprint already holds a seat of the license.", code="ACTIVATION_EXISTS") from None


def activation_delete(*, activation_id: int) -> None:
    """Free a seat. No audit event: the license-level deactivate is the audited way (spec 4.4)."""
    with transaction.atomic(using=DB):
        seat = selectors.activations().select_for_update(of=("self",)).filter(pk=activation_id).first()
        if seat is None:
            raise NotFound("No activation has this id.")
        seat.delete(using=DB)


# Helpers ------------------------------------------------------------------------------------------


def _audit(license: License, event_type: LicenseEventType, actor: str, data: dict) -> LicenseEvent:
    return LicenseEvent.objects.using(DB).create(license=license, type=event_type, actor=actor, data=data)


def _locked(model, pk: int):
    instance = model.objects.using(DB).select_for_update().filter(pk=pk).first()
    if instance is None:
        raise NotFound(f"No {model._meta.verbose_name} has this id.")
    return instance
