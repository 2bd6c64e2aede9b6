"""The DRF authentication classes every service uses; the verification itself is in
merchant_platform.verification.

- `JWTAuthentication`: `Authorization: Bearer <access token>` (verification.tokens).
- `ServiceBasicAuthentication`: HTTP Basic of the service accounts (verification.service_accounts).

Every failure is a 401 problem document with a stable code (TOKEN_EXPIRED, TOKEN_INVALID, ...).
How a service protects a view and how tests mint tokens: docs/authentication.md.
"""

from __future__ import annotations

from rest_framework import authentication, exceptions

from merchant_platform.errors import ApiError
from merchant_platform.verification.service_accounts import CredentialsRejected, service_principal
from merchant_platform.verification.tokens import TokenRejected, verify_access_token


class TokenAuthenticationFailed(ApiError, exceptions.AuthenticationFailed):
    """A 401 with the stable code of the refusal; DRF adds the `WWW-Authenticate: Bearer` header."""

    status_code = 401
    default_code = "TOKEN_INVALID"
    default_detail = "The access token is not valid."


class JWTAuthentication(authentication.BaseAuthentication):
    """DRF authentication class: `Authorization: Bearer <ES256 access token>`."""

    keyword = b"bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request)
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != self.keyword:
            return None
        token = token.strip()
        if not token or b" " in token:
            raise TokenAuthenticationFailed("The Authorization header must be `Bearer <token>`.")
        try:
            text = token.decode("ascii")
        except UnicodeDecodeError:
            raise TokenAuthenticationFailed("The access token is malformed.") from None
        try:
            user = verify_access_token(text)
        except TokenRejected as exc:
            raise TokenAuthenticationFailed(exc.detail, code=exc.code) from None
        return user, user.claims

    def authenticate_header(self, request):
        return 'Bearer realm="merchant-platform"'


class ServiceBasicAuthentication(authentication.BaseAuthentication):
    """DRF authentication class: HTTP Basic of a service account (`request.user` a `ServicePrincipal`)."""

    www_authenticate_realm = "services"

    def authenticate(self, request):
        try:
            principal = service_principal(authentication.get_authorization_header(request))
        except CredentialsRejected as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        return None if principal is None else (principal, None)

    def authenticate_header(self, request):
        return f'Basic realm="{self.www_authenticate_realm}"'
