"""Authentication shared by every service.

`ServiceBasicAuthentication` is HTTP Basic for the service-to-service calls the spec names
(spec 5): the accounts come from SERVICE_BASIC_AUTH_ACCOUNTS and passwords are compared in
constant time. The JWT verifier lives beside it (identity's issue).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass

from django.conf import settings
from rest_framework import authentication, exceptions


@dataclass(frozen=True)
class ServicePrincipal:
    """The caller of a service-to-service request."""

    username: str
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_service: bool = True

    @property
    def id(self) -> str:
        return f"service:{self.username}"


class ServiceBasicAuthentication(authentication.BaseAuthentication):
    www_authenticate_realm = "services"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request)
        scheme, _, encoded = header.partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            username, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise exceptions.AuthenticationFailed("Malformed Basic credentials.") from None
        if not sep:
            raise exceptions.AuthenticationFailed("Malformed Basic credentials.")
        expected = settings.SERVICE_BASIC_AUTH_ACCOUNTS.get(username)
        # Compare against a dummy when the account is unknown, so timing does not reveal accounts.
        ok = hmac.compare_digest(password.encode(), (expected or "\0" * 32).encode())
        if not (expected and ok):
            raise exceptions.AuthenticationFailed("Invalid service credentials.")
        return ServicePrincipal(username=username), None

    def authenticate_header(self, request):
        return f'Basic realm="{self.www_authenticate_realm}"'


def basic_auth_header(username: str | None = None, password: str | None = None) -> str:
    """The Authorization header this process presents on outgoing service-to-service calls."""
    user = username or settings.SERVICE_BASIC_AUTH_USER
    secret = password or settings.SERVICE_BASIC_AUTH_PASSWORD
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
