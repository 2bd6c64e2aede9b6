"""HTTP Basic for the service-to-service calls the spec names (spec 5): each calling service has its
own account (SERVICE_BASIC_AUTH_ACCOUNTS, passwords compared in constant time), which may do only
what SERVICE_ACCOUNT_PERMISSIONS lists for it (merchant_platform.policy). `basic_auth_header()`
presents the calling service's account.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import sys
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from merchant_platform.registry import SERVICE_APPS


class CredentialsRejected(Exception):
    """Basic credentials that are malformed or name no account with that password."""


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


def service_principal(authorization: bytes) -> ServicePrincipal | None:
    """The service account an `Authorization` header (bytes) presents with HTTP Basic; None for
    another scheme; `CredentialsRejected` when malformed or wrong."""
    scheme, _, encoded = authorization.partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        username, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise CredentialsRejected("Malformed Basic credentials.") from None
    if not sep:
        raise CredentialsRejected("Malformed Basic credentials.")
    expected = settings.SERVICE_BASIC_AUTH_ACCOUNTS.get(username)
    # Compare against a dummy when the account is unknown, so timing does not reveal accounts.
    ok = hmac.compare_digest(password.encode(), (expected or "\0" * 32).encode())
    if not (expected and ok):
        raise CredentialsRejected("Invalid service credentials.")
    return ServicePrincipal(username=username)


def calling_service() -> str | None:
    """The service whose code makes the call: the first `apps.<service>` module up the stack (commerce's
    saga client, ledger's export reader...). In the all-in-one process this tells the services apart."""
    frame = sys._getframe(1)
    while frame is not None:
        package, _, rest = frame.f_globals.get("__name__", "").partition(".")
        service = rest.partition(".")[0]
        if package == "apps" and service in SERVICE_APPS:
            return service
        frame = frame.f_back
    return None


def basic_auth_header(username: str | None = None, password: str | None = None) -> str:
    """The Authorization header of an outgoing service-to-service call: the calling service's own
    account (named after it, its password from SERVICE_BASIC_AUTH_CREDENTIALS); from code outside every
    service (an operator's script), the account SERVICE_BASIC_AUTH_USER names."""
    user = username or calling_service() or settings.SERVICE_BASIC_AUTH_USER
    secret = password or settings.SERVICE_BASIC_AUTH_CREDENTIALS.get(user)
    if not user or not secret:
        raise ImproperlyConfigured(f"no password for the service account {user!r} in SERVICE_BASIC_AUTH_CREDENTIALS")
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
