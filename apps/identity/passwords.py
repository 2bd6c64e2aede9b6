"""Password hashing with argon2id (argon2-cffi); parameters from settings (docs/services/identity.md)."""

from __future__ import annotations

import contextlib
from functools import cache

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError
from django.conf import settings


@cache
def _hasher(time_cost: int, memory_cost: int, parallelism: int) -> PasswordHasher:
    return PasswordHasher(time_cost=time_cost, memory_cost=memory_cost, parallelism=parallelism, type=Type.ID)


def hasher() -> PasswordHasher:
    return _hasher(settings.IDENTITY_ARGON2_TIME_COST, settings.IDENTITY_ARGON2_MEMORY_COST_KIB, settings.IDENTITY_ARGON2_PARALLELISM)


@cache
def _dummy_hash(time_cost: int, memory_cost: int, parallelism: int) -> str:
    return _hasher(time_cost, memory_cost, parallelism).hash("no account has this password")


def hash_password(password: str) -> str:
    return hasher().hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches. Without a hash (unknown account) a dummy hash is checked, so
    both answers take the same time."""
    if password_hash is None:
        params = (settings.IDENTITY_ARGON2_TIME_COST, settings.IDENTITY_ARGON2_MEMORY_COST_KIB, settings.IDENTITY_ARGON2_PARALLELISM)
        # Only the time the check takes matters here; its outcome is discarded.
        with contextlib.suppress(VerificationError):
            hasher().verify(_dummy_hash(*params), password)
        return False
    try:
        return hasher().verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return hasher().check_needs_rehash(password_hash)
