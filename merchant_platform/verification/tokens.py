"""Access tokens: `Authorization: Bearer <access token>`, an ES256 JWT issued by identity and verified
against identity's key set (merchant_platform.verification.jwks). Only `alg: ES256` is accepted, so
`alg: none` and HS256-keyed-with-the-public-key tokens are refused before any key is used. Every
refusal is a `TokenRejected` with a stable code (TOKEN_EXPIRED, TOKEN_INVALID, ...).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import jwt
from django.conf import settings

from merchant_platform import revocation
from merchant_platform.verification.jwks import ALGORITHM, jwks_cache


class TokenRejected(Exception):
    """An access token refused, with a stable `code`; the DRF class answers it with a 401."""

    def __init__(self, detail: str = "The access token is not valid.", *, code: str = "TOKEN_INVALID"):
        super().__init__(detail)
        self.detail = detail
        self.code = code


@dataclass(frozen=True)
class TokenUser:
    """The caller of a request that carried a valid access token (`request.user`)."""

    id: int
    claims: Mapping = field(repr=False, compare=False)
    # Per-request memo of the policy layer (merchant_platform.policy), never shared.
    policy_memo: dict = field(default_factory=dict, repr=False, compare=False)
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_service: bool = False

    @property
    def pk(self) -> int:
        return self.id

    @property
    def token_id(self) -> str | None:
        return self.claims.get("jti")


def access_token_claims(*, user_id: int, lifetime_seconds: int, now: float | None = None, **extra) -> dict:
    """The claims of an access token: what identity signs and every verifier checks. `iat` keeps
    microseconds (RFC 7519 allows a fractional NumericDate), so a token issued just after a user's
    "valid after" instant is told from one issued just before it (merchant_platform.revocation)."""
    issued_at = round(time.time(), 6) if now is None else now
    return {
        "iss": settings.JWT_ISSUER,
        "aud": settings.JWT_AUDIENCE,
        "sub": str(user_id),
        "iat": issued_at,
        "nbf": int(issued_at),
        "exp": int(issued_at) + lifetime_seconds,
        "jti": uuid.uuid4().hex,
        **extra,
    }


# --- Verification ---------------------------------------------------------------------------------


class VerifiedTokens:
    """Tokens this process verified recently, so a client's next requests with the same token skip
    the signature check. A hit still checks `exp`/`nbf`, that the key is the one the token was
    verified with (a changed key set misses), and the issuer and audience; bounded (LRU)."""

    def __init__(self, capacity: int = 10_000):
        self.capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[Mapping, str, object, str, str]] = OrderedDict()

    def get(self, token: str) -> Mapping | None:
        with self._lock:
            entry = self._entries.get(token)
            if entry is not None:
                self._entries.move_to_end(token)
        if entry is None:
            return None
        claims, kid, key, issuer, audience = entry
        now, leeway = time.time(), settings.JWT_LEEWAY_SECONDS
        fresh = claims["exp"] + leeway > now and claims.get("nbf", 0) - leeway <= now
        if not (fresh and jwks_cache.known_key(kid) is key and (issuer, audience) == (settings.JWT_ISSUER, settings.JWT_AUDIENCE)):
            return None
        return claims

    def put(self, token: str, claims: Mapping, kid: str, key) -> None:
        with self._lock:
            self._entries[token] = (claims, kid, key, settings.JWT_ISSUER, settings.JWT_AUDIENCE)
            self._entries.move_to_end(token)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


verified_tokens = VerifiedTokens()


def _unverified_header(token: str) -> dict:
    """The JOSE header, read without PyJWT's full parse (PyJWT parses and checks all of it next)."""
    encoded, _, rest = token.partition(".")
    if rest.count(".") != 1:
        raise TokenRejected("The access token is malformed.")
    try:
        header = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (ValueError, binascii.Error):
        raise TokenRejected("The access token is malformed.") from None
    if not isinstance(header, dict):
        raise TokenRejected("The access token is malformed.")
    return header


def verify_access_token(token: str) -> TokenUser:
    """Verify an access token (signature, algorithm, kid, exp, iss, aud, not issued before the
    user's "valid after" instant); raise `TokenRejected`.

    Usable outside DRF, e.g. for the WebSocket handshake.
    """
    claims = verified_tokens.get(token)
    if claims is None:
        claims = _verify(token)
    # Checked on every request, cached verification or not: a password change or a deactivation
    # refuses the user's earlier tokens at once (merchant_platform.revocation).
    if revocation.issued_before_cutoff(int(claims["sub"]), claims["iat"]):
        raise TokenRejected(
            "The access token was issued before the account's password changed or it was deactivated.", code="TOKEN_REVOKED"
        )
    return TokenUser(id=int(claims["sub"]), claims=claims)


def _verify(token: str) -> Mapping:
    header = _unverified_header(token)
    if header.get("alg") != ALGORITHM:
        raise TokenRejected(f"Only {ALGORITHM} tokens are accepted.", code="TOKEN_ALGORITHM_REJECTED")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise TokenRejected("The access token header carries no key id (kid).")
    key = jwks_cache.key_for(kid)
    if key is None:
        raise TokenRejected("The access token was signed by an unknown key.", code="TOKEN_KEY_UNKNOWN")
    try:
        claims = jwt.decode(
            token,
            key=key,
            algorithms=[ALGORITHM],
            audience=settings.JWT_AUDIENCE,
            issuer=settings.JWT_ISSUER,
            leeway=settings.JWT_LEEWAY_SECONDS,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )
    except jwt.ExpiredSignatureError:
        raise TokenRejected("The access token has expired.", code="TOKEN_EXPIRED") from None
    except jwt.InvalidAudienceError:
        raise TokenRejected("The access token is not meant for this platform.", code="TOKEN_AUDIENCE_INVALID") from None
    except jwt.InvalidIssuerError:
        raise TokenRejected("The access token was not issued by identity.", code="TOKEN_ISSUER_INVALID") from None
    except jwt.InvalidTokenError:
        raise TokenRejected("The access token signature or claims are invalid.") from None
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject.isdigit():
        raise TokenRejected("The access token subject is not a user id.")
    claims = MappingProxyType(claims)  # shared by every request that presents the token: read-only
    verified_tokens.put(token, claims, kid, key)
    return claims
