"""Reads of identity's records."""

from __future__ import annotations

from apps.identity import identifiers
from apps.identity.models import User

IDENTIFIER_FIELDS = {identifiers.EMAIL: "email", identifiers.PHONE: "phone", identifiers.USERNAME: "username"}


def user_by_identifier(kind: str, value: str) -> User | None:
    """The live account holding this normalized identifier, or None."""
    return User.objects.filter(**{IDENTIFIER_FIELDS[kind]: value}).first()


def user_get(user_id: int) -> User | None:
    return User.objects.filter(pk=user_id).first()


def user_for_otp(namespace: str, kind: str, value: str) -> User | None:
    """The active account a code of this namespace may be delivered to, or None."""
    user = user_by_identifier(kind, value)
    if user is None or not user.is_active:
        return None
    if namespace == "verify-email" and (kind != identifiers.EMAIL or user.email_verified_at is not None):
        return None
    return user


def identifier_verified(user: User, kind: str) -> bool:
    """Whether someone proved they control this identifier of the account: an email or a phone
    number by a one-time code sent to it; a username is a name, never a channel, and needs no proof."""
    if kind == identifiers.EMAIL:
        return user.email_verified_at is not None
    if kind == identifiers.PHONE:
        return user.phone_verified_at is not None
    return True
