"""Identity's records: users and their refresh tokens (schema `identity`)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from merchant_platform.models import BaseModel


class User(BaseModel):
    """An account: up to three identifiers (each unique among live accounts, stored normalized)."""

    email = models.CharField(max_length=254, null=True, blank=True, help_text="Case-folded.")
    phone = models.CharField(max_length=16, null=True, blank=True, help_text="E.164.")
    username = models.CharField(max_length=32, null=True, blank=True, help_text="Case-folded.")
    password_hash = models.CharField(max_length=255, help_text="argon2id (argon2-cffi).")
    is_active = models.BooleanField(default=True)
    email_verified_at = models.DateTimeField(null=True, blank=True)
    phone_verified_at = models.DateTimeField(null=True, blank=True)
    password_changed_at = models.DateTimeField(null=True, blank=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta(BaseModel.Meta):
        db_table = "user"
        constraints = [
            models.UniqueConstraint(fields=["email"], condition=Q(deleted_at__isnull=True), name="user_email_unique_alive"),
            models.UniqueConstraint(fields=["phone"], condition=Q(deleted_at__isnull=True), name="user_phone_unique_alive"),
            models.UniqueConstraint(fields=["username"], condition=Q(deleted_at__isnull=True), name="user_username_unique_alive"),
            models.CheckConstraint(
                condition=Q(email__isnull=False) | Q(phone__isnull=False) | Q(username__isnull=False), name="user_has_an_identifier"
            ),
        ]

    def __str__(self) -> str:
        return self.username or self.email or self.phone or str(self.pk)


class RefreshToken(BaseModel):
    """An opaque refresh token, stored as its SHA-256. Refreshing rotates it within its family;
    presenting a rotated (revoked) token again revokes the whole family (a stolen token)."""

    user = models.ForeignKey(User, on_delete=models.PROTECT, related_name="refresh_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    family = models.UUIDField(db_index=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=32, blank=True, default="")

    class Meta(BaseModel.Meta):
        db_table = "refresh_token"

    def __str__(self) -> str:
        return f"refresh token {self.pk} of user {self.user_id}"
