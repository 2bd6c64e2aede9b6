"""Licensing records: policies, licenses, activation seats and the license audit trail (spec 2.1)."""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models import F, Q

from apps.licensing.states import LicenseEventType, LicenseStatus
from merchant_platform.models import BaseModel, OwnedModel

# Crockford's base32 alphabet: no I, L, O or U, so a key read aloud or typed cannot be misread.
KEY_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
KEY_GROUPS, KEY_GROUP_LENGTH = 5, 5  # 125 random bits


def generate_license_key() -> str:
    groups = ("".join(secrets.choice(KEY_ALPHABET) for _ in range(KEY_GROUP_LENGTH)) for _ in range(KEY_GROUPS))
    return "-".join(groups)


class Policy(OwnedModel):
    """What a license grants by default: its duration, its seat limit and its entitlements."""

    FREE_TRIAL_CODE = "FREE_TRIAL"

    code = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    duration_seconds = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: the license never expires.")
    activation_limit = models.PositiveIntegerField(default=1)
    entitlements = models.JSONField(default=list, blank=True)
    is_trial = models.BooleanField(default=False)

    class Meta(OwnedModel.Meta):
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return self.code


class License(OwnedModel):
    """A license held by `owner_id` (an identity user id), optionally for one merchant (`merchant_id`,
    the tenant its employees reach it through). No foreign key crosses services: both are plain ids."""

    key = models.CharField(max_length=64, unique=True, default=generate_license_key, editable=False)
    name = models.CharField(max_length=200, blank=True)
    owner_id = models.BigIntegerField(db_index=True)
    merchant_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="licenses")
    status = models.CharField(max_length=16, choices=LicenseStatus.choices, default=LicenseStatus.INACTIVE, db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_validated_at = models.DateTimeField(null=True, blank=True)
    # IActivationConfig (spec 2.1): {"limit": n}, the number of fingerprints that may hold a seat.
    activation_config = models.JSONField(default=dict)
    entitlements = models.JSONField(default=list, blank=True, help_text="Granted on top of the policy's entitlements.")
    metadata = models.JSONField(default=dict, blank=True)
    # Certificate publication (apps/licensing/certificates.py): every write that changes what the
    # certificate says raises `certificate_version`; Redis keeps a certificate only from a version at
    # least as new as the one it holds, and `certificate_published_version` records what reached
    # Redis, so a publication that failed after the commit is retried by a periodic sweep.
    certificate_version = models.BigIntegerField(default=1)
    certificate_published_version = models.BigIntegerField(default=0)

    class Meta(OwnedModel.Meta):
        indexes = [
            models.Index(
                fields=["id"],
                condition=Q(certificate_published_version__lt=F("certificate_version")),
                name="licensing_certificate_pending",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name or self.key} ({self.status})"

    @property
    def activation_limit(self) -> int:
        return int(self.activation_config.get("limit", 0))

    def all_entitlements(self) -> list[str]:
        return sorted({*self.policy.entitlements, *self.entitlements})


class Activation(OwnedModel):
    """A seat: one machine fingerprint holding one of the license's `limit` places."""

    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="activations")
    fingerprint = models.CharField(max_length=255)
    name = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta(OwnedModel.Meta):
        constraints = [
            # A freed (soft-deleted) seat does not block the fingerprint from taking a seat again.
            models.UniqueConstraint(
                fields=["license", "fingerprint"], condition=Q(deleted_at__isnull=True), name="licensing_one_live_seat_per_fingerprint"
            )
        ]

    def __str__(self) -> str:
        return self.fingerprint


class LicenseEvent(BaseModel):
    """The append-only audit trail of a license (spec 6.3); the database refuses updates and deletes."""

    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="events")
    type = models.CharField(max_length=16, choices=LicenseEventType.choices)
    actor = models.CharField(max_length=64, blank=True, help_text="Who caused it: a user id, service:<name>, or system.")
    data = models.JSONField(default=dict, blank=True)

    class Meta(BaseModel.Meta):
        ordering = ["id"]
        indexes = [models.Index(fields=["license", "type"], name="licensing_event_license_type")]

    def __str__(self) -> str:
        return f"{self.type} {self.license_id}"
