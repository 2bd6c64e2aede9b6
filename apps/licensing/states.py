"""The license state machine (spec 3.1 names ACTIVATED and EXPIRED; the rest is ours, see
docs/services/licensing.md).

    create ──> INACTIVE ──activate──> ACTIVATED ──suspend──> SUSPENDED
                  ^                    │  │  ^                   │
                  └────deactivate──────┘  │  └────reinstate──────┘
                                          │
              validate, past expiresAt ───┴──> EXPIRED ──renew──> ACTIVATED
    revoke: from any state but REVOKED ──> REVOKED (terminal)

Every action not in this table answers 409: LICENSE_REVOKED on a revoked license,
LICENSE_INVALID_TRANSITION otherwise.
"""

from __future__ import annotations

from django.db import models


class LicenseStatus(models.TextChoices):
    INACTIVE = "INACTIVE", "Inactive"
    ACTIVATED = "ACTIVATED", "Activated"
    SUSPENDED = "SUSPENDED", "Suspended"
    EXPIRED = "EXPIRED", "Expired"
    REVOKED = "REVOKED", "Revoked"


class LicenseAction(models.TextChoices):
    """The lifecycle actions; each writes the LicenseEvent type of the same name (spec 6.3)."""

    ACTIVATE = "activate"
    DEACTIVATE = "deactivate"
    SUSPEND = "suspend"
    REINSTATE = "reinstate"
    RENEW = "renew"
    REVOKE = "revoke"


class LicenseEventType(models.TextChoices):
    CREATED = "created"
    ACTIVATED = "activated"
    DEACTIVATED = "deactivated"
    SUSPENDED = "suspended"
    REINSTATED = "reinstated"
    RENEWED = "renewed"
    EXPIRED = "expired"
    REVOKED = "revoked"


S = LicenseStatus

# action -> (states it may start from, state it leads to)
TRANSITIONS: dict[LicenseAction, tuple[frozenset[LicenseStatus], LicenseStatus]] = {
    LicenseAction.ACTIVATE: (frozenset({S.INACTIVE}), S.ACTIVATED),
    LicenseAction.DEACTIVATE: (frozenset({S.ACTIVATED}), S.INACTIVE),
    LicenseAction.SUSPEND: (frozenset({S.ACTIVATED}), S.SUSPENDED),
    LicenseAction.REINSTATE: (frozenset({S.SUSPENDED}), S.ACTIVATED),
    LicenseAction.RENEW: (frozenset({S.ACTIVATED, S.EXPIRED}), S.ACTIVATED),
    LicenseAction.REVOKE: (frozenset({S.INACTIVE, S.ACTIVATED, S.SUSPENDED, S.EXPIRED}), S.REVOKED),
}

EVENT_OF_ACTION: dict[LicenseAction, LicenseEventType] = {
    LicenseAction.ACTIVATE: LicenseEventType.ACTIVATED,
    LicenseAction.DEACTIVATE: LicenseEventType.DEACTIVATED,
    LicenseAction.SUSPEND: LicenseEventType.SUSPENDED,
    LicenseAction.REINSTATE: LicenseEventType.REINSTATED,
    LicenseAction.RENEW: LicenseEventType.RENEWED,
    LicenseAction.REVOKE: LicenseEventType.REVOKED,
}


def next_status(action: LicenseAction, current: str) -> LicenseStatus | None:
    """The state `action` leads to from `current`, or None when the machine forbids it."""
    sources, target = TRANSITIONS[action]
    return target if current in sources else None


class ValidationCode(models.TextChoices):
    """The answer of validate (modelled on Keygen's validation codes)."""

    VALID = "VALID", "The license is activated and the fingerprint holds a seat."
    NOT_FOUND = "NOT_FOUND", "No license has this key."
    INACTIVE = "INACTIVE", "The license has not been activated (or was deactivated)."
    EXPIRED = "EXPIRED", "The license is past its expiry."
    SUSPENDED = "SUSPENDED", "The license is suspended."
    REVOKED = "REVOKED", "The license is revoked."
    TOO_MANY_ACTIVATIONS = "TOO_MANY_ACTIVATIONS", "Every seat of the license is taken by other fingerprints."
    UNKNOWN_FINGERPRINT = "UNKNOWN_FINGERPRINT", "The fingerprint holds no seat and the caller asked not to take one."


CODE_OF_STATUS: dict[str, ValidationCode] = {
    S.INACTIVE: ValidationCode.INACTIVE,
    S.EXPIRED: ValidationCode.EXPIRED,
    S.SUSPENDED: ValidationCode.SUSPENDED,
    S.REVOKED: ValidationCode.REVOKED,
}
