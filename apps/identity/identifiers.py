"""Identifiers of a user: email (case-folded), phone (E.164, phonenumbers) and username (case-folded).

Sign-in and OTP flows take one `identifier` string and tell its kind by shape: an `@` makes it an
email, a leading `+` or only digits and phone punctuation a phone number, anything else a username.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import phonenumbers
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

EMAIL, PHONE, USERNAME = "email", "phone", "username"
USERNAME_PATTERN = re.compile(r"^[a-z][a-z0-9._-]{2,31}$")
PHONE_SHAPE = re.compile(r"^\+?[0-9 ()./-]{5,24}$")


class InvalidIdentifier(ValueError):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Identifier:
    kind: str
    value: str


def normalize_email(raw: str) -> str:
    value = raw.strip().casefold()
    try:
        validate_email(value)
    except ValidationError:
        raise InvalidIdentifier(EMAIL, "Enter a valid email address.") from None
    return value


def normalize_phone(raw: str) -> str:
    try:
        number = phonenumbers.parse(raw.strip(), settings.IDENTITY_DEFAULT_PHONE_REGION)
    except phonenumbers.NumberParseException:
        raise InvalidIdentifier(PHONE, "Enter a phone number in international format, e.g. +14155550123.") from None
    if not phonenumbers.is_valid_number(number):
        raise InvalidIdentifier(PHONE, "This phone number is not valid.")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def normalize_username(raw: str) -> str:
    value = raw.strip().casefold()
    if not USERNAME_PATTERN.match(value):
        raise InvalidIdentifier(USERNAME, "A username is 3 to 32 letters, digits, '.', '_' or '-', starting with a letter.")
    return value


def parse_identifier(raw: str) -> Identifier:
    """The kind and normalized value of a sign-in identifier; raises InvalidIdentifier."""
    text = (raw or "").strip()
    if "@" in text:
        return Identifier(EMAIL, normalize_email(text))
    if PHONE_SHAPE.match(text):
        return Identifier(PHONE, normalize_phone(text))
    return Identifier(USERNAME, normalize_username(text))
