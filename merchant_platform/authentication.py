"""Authentication shared by every service.

- `JWTAuthentication`: `Authorization: Bearer <access token>`, an ES256 JWT issued by identity and
  verified against identity's key set (JWKS, `/jw-certs`). Keys are cached per process (and the last
  key set fetched is kept in Redis, with an HMAC under APP_ENV_APPLICATION_SECRET: a copy that fails
  it is dropped), so tokens keep verifying while identity or its database is down (spec 7). An
  unknown `kid` triggers a refetch promptly (fetches are at least JWKS_REFETCH_MIN_INTERVAL_SECONDS
  apart per process); a kid the fetched key set did not hold is not refetched for
  JWKS_UNKNOWN_KID_TTL_SECONDS (a negative cache per kid), so made-up kids cannot hold back a
  real rotation. Only `alg: ES256` is accepted, so `alg: none` and
  HS256-keyed-with-the-public-key tokens are refused before any key is used.
- `ServiceBasicAuthentication`: HTTP Basic for the service-to-service calls the spec names (spec 5):
  each calling service has its own account (SERVICE_BASIC_AUTH_ACCOUNTS, passwords compared in
  constant time), which may do only what SERVICE_ACCOUNT_PERMISSIONS lists for it (the policy layer,
  merchant_platform.authorization). `basic_auth_header()` presents the calling service's account.

Every failure is a 401 problem document with a stable code (TOKEN_EXPIRED, TOKEN_INVALID, ...).
How a service protects a view and how tests mint tokens: docs/authentication.md.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django_redis import get_redis_connection
from rest_framework import authentication, exceptions

from merchant_platform import crypto, http, revocation
from merchant_platform.errors import ApiError
from merchant_platform.logging import get_logger
from merchant_platform.registry import SERVICE_APPS

log = get_logger(__name__)

ALGORITHM = "ES256"
JWKS_CACHE_KEY = "auth:jwks:last"
# A cached copy of the key set in Redis outlives identity outages of a few days.
JWKS_SHARED_COPY_TTL_SECONDS = 7 * 24 * 3600
# How many kids the negative cache of unknown kids remembers (the oldest are forgotten first).
UNKNOWN_KIDS_CAPACITY = 10_000
# The copy carries an HMAC under a key derived from APP_ENV_APPLICATION_SECRET for this purpose.
JWKS_MAC_PURPOSE = "jwks-shared-copy"


class TokenRejected(ApiError, exceptions.AuthenticationFailed):
    """A 401 with a stable code; DRF adds the `WWW-Authenticate: Bearer` header."""

    status_code = 401
    default_code = "TOKEN_INVALID"
    default_detail = "The access token is not valid."


@dataclass(frozen=True)
class TokenUser:
    """The caller of a request that carried a valid access token (`request.user`)."""

    id: int
    claims: Mapping = field(repr=False, compare=False)
    # Per-request memo of the policy layer (merchant_platform.authorization), never shared.
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


# --- The key set ----------------------------------------------------------------------------------


def public_key_from_jwk(jwk: dict) -> ec.EllipticCurvePublicKey | None:
    """The P-256 public key of one JWKS member, or None when the member is not an ES256 signing key."""
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or jwk.get("alg", ALGORITHM) != ALGORITHM:
        return None
    if jwk.get("use", "sig") != "sig" or not jwk.get("kid"):
        return None
    try:
        key = jwt.PyJWK(jwk, algorithm=ALGORITHM).key
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
        return None
    return key if isinstance(key, ec.EllipticCurvePublicKey) else None


def jwk_thumbprint(jwk: dict) -> str:
    """RFC 7638 thumbprint of an EC public JWK: the `kid` identity gives each key."""
    canonical = json.dumps({name: jwk[name] for name in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).decode().rstrip("=")


def public_jwk(public_key: ec.EllipticCurvePublicKey, *, kid: str | None = None) -> dict:
    """The JWKS member of a P-256 public key: kty, crv, x, y, kid, alg and use."""
    jwk = jwt.algorithms.ECAlgorithm.to_jwk(public_key, as_dict=True)
    return {**jwk, "kid": kid or jwk_thumbprint(jwk), "alg": ALGORITHM, "use": "sig"}


class JWKSCache:
    """kid -> public key, per process.

    Sources, in order: keys pinned with `pin()` (tests, tools), the key set last fetched, and on an
    unknown kid a refetch from the local source (identity's own key ring when identity runs in this
    process) or else IDENTITY_JWKS_URL. A failed fetch keeps the keys already known and falls back
    to the copy in Redis, so an identity outage does not stop verification.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._pinned: dict[str, ec.EllipticCurvePublicKey] = {}
        self._fetched: dict[str, ec.EllipticCurvePublicKey] = {}
        self._fetched_at = 0.0
        self._last_attempt = float("-inf")
        self._refreshing = False
        self._local_source: Callable[[], dict] | None = None
        # kid -> monotonic instant until which a kid the key set did not hold is not refetched.
        self._unknown: OrderedDict[str, float] = OrderedDict()

    # Public API ----------------------------------------------------------------------------------

    def set_local_source(self, source: Callable[[], dict] | None) -> None:
        """Read the key set from `source()` instead of HTTP (identity does this in its own process)."""
        self._local_source = source
        self._last_attempt = float("-inf")

    def pin(self, jwks_or_jwk: dict) -> list[str]:
        """Trust these keys for the life of the process (test keys, tools); returns their kids."""
        kids = []
        for jwk in jwks_or_jwk.get("keys", [jwks_or_jwk]):
            key = public_key_from_jwk(jwk)
            if key is not None:
                self._pinned[jwk["kid"]] = key
                kids.append(jwk["kid"])
        return kids

    def unpin(self, kid: str) -> None:
        self._pinned.pop(kid, None)

    def known_key(self, kid: str) -> ec.EllipticCurvePublicKey | None:
        """The key of `kid` if this process knows it, without fetching."""
        return self._pinned.get(kid) or self._fetched.get(kid)

    def key_for(self, kid: str) -> ec.EllipticCurvePublicKey | None:
        key = self._pinned.get(kid) or self._fetched.get(kid)
        if key is not None:
            if time.monotonic() - self._fetched_at > settings.JWKS_MAX_AGE_SECONDS and kid not in self._pinned:
                self._refresh_in_background()
            return key
        now = time.monotonic()
        if self._unknown.get(kid, float("-inf")) > now:
            return None  # the key set did not hold it a moment ago: no refetch for this kid yet
        if self.refresh(reason="unknown kid") and kid not in self._fetched:
            self._remember_unknown(kid, now)
        # A fetch another request started (or just made) may have brought the kid.
        return self._fetched.get(kid)

    def refresh(self, *, reason: str = "requested", force: bool = False) -> bool:
        """Fetch the key set now unless one was fetched within the refetch interval; True if fetched."""
        now = time.monotonic()
        if not force and now - self._last_attempt < settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS:
            with self._lock:  # a fetch in flight (e.g. a replica's first): its keys, not "unknown"
                return False
        with self._lock:
            if not force and time.monotonic() - self._last_attempt < settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS:
                return False
            self._last_attempt = time.monotonic()
            try:
                jwks = self._fetch()
            except Exception as exc:  # any failure keeps the known keys (spec 7)
                log.warning("auth.jwks_fetch_failed", reason=reason, error=f"{type(exc).__name__}: {exc}"[:300])
                if not self._fetched:
                    self._install(self._shared_copy() or {"keys": []}, source="redis")
                return False
            self._install(jwks, source="local" if self._local_source else "http")
            if not self._local_source:
                self._store_shared_copy(jwks)
            return True

    def warm_up(self) -> None:
        """Fetch at process start without delaying it (spec 5: verifiers fetch the key set at boot)."""
        threading.Thread(target=self.refresh, kwargs={"reason": "boot", "force": True}, name="jwks-warm-up", daemon=True).start()

    def reset(self) -> None:
        """Forget the fetched keys and the refetch timer (pinned keys stay); for tests and tools."""
        with self._lock:
            self._fetched = {}
            self._fetched_at = 0.0
            self._last_attempt = float("-inf")
            self._unknown.clear()

    def kids(self) -> list[str]:
        return sorted({*self._pinned, *self._fetched})

    # Internals -----------------------------------------------------------------------------------

    def _fetch(self) -> dict:
        if self._local_source is not None:
            return self._local_source()
        response = http.session(retries=0).get(settings.IDENTITY_JWKS_URL, timeout=settings.JWKS_FETCH_TIMEOUT_SECONDS)
        response.raise_for_status()
        jwks = response.json()
        if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
            raise ValueError("the JWKS document has no `keys` array")
        return jwks

    def _install(self, jwks: dict, *, source: str) -> None:
        keys = {}
        for jwk in jwks.get("keys", []):
            key = public_key_from_jwk(jwk) if isinstance(jwk, dict) else None
            if key is not None:
                keys[jwk["kid"]] = key
        self._fetched = keys
        self._fetched_at = time.monotonic()
        log.info("auth.jwks_loaded", source=source, kids=",".join(sorted(keys)))

    def _remember_unknown(self, kid: str, now: float) -> None:
        with self._lock:
            self._unknown[kid] = now + settings.JWKS_UNKNOWN_KID_TTL_SECONDS
            self._unknown.move_to_end(kid)
            while len(self._unknown) > UNKNOWN_KIDS_CAPACITY:
                self._unknown.popitem(last=False)

    def _refresh_in_background(self) -> None:
        if self._refreshing:
            return
        self._refreshing = True

        def run():
            try:
                self.refresh(reason="max age")
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="jwks-refresh", daemon=True).start()

    @staticmethod
    def _shared_copy() -> dict | None:
        """The key set another process stored in Redis, if its MAC holds and it is not too old.
        Read raw (never unpickled): whoever can write to Redis must not be able to install keys."""
        name = shared_copy_name()
        if name is None:
            return None
        try:
            redis = get_redis_connection("default")
            raw = redis.get(name)
        except Exception as exc:  # Redis down: nothing to fall back to
            log.warning("auth.jwks_shared_copy_unavailable", error=type(exc).__name__)
            return None
        if raw is None:
            return None
        jwks = _authentic_shared_copy(raw)
        if jwks is None:
            log.warning("auth.jwks_shared_copy_rejected")
            try:
                redis.delete(name)
            except Exception as exc:
                log.warning("auth.jwks_shared_copy_unavailable", error=type(exc).__name__)
        return jwks

    @staticmethod
    def _store_shared_copy(jwks: dict) -> None:
        stored = int(time.time())
        document = json.dumps(jwks, separators=(",", ":"), sort_keys=True)
        tag = crypto.mac(_shared_copy_data(document, stored), purpose=JWKS_MAC_PURPOSE)
        if tag is None:  # no application secret: a copy nobody could authenticate is not kept
            return
        try:
            entry = json.dumps({"jwks": document, "stored": stored, "mac": tag})
            get_redis_connection("default").set(shared_copy_name(), entry, ex=JWKS_SHARED_COPY_TTL_SECONDS)
        except Exception as exc:  # the copy is an optimisation; verification goes on without it
            log.warning("auth.jwks_shared_copy_not_stored", error=type(exc).__name__)


def shared_copy_name() -> str | None:
    """The Redis key of the shared copy: one per application secret (named by a MAC of a constant),
    so a process configured with another secret neither overwrites nor erases the copy its peers
    fall back on while identity is down. None without a secret."""
    tag = crypto.mac(JWKS_CACHE_KEY.encode(), purpose=JWKS_MAC_PURPOSE)
    return None if tag is None else cache.make_key(f"{JWKS_CACHE_KEY}:{tag[:16]}")


def _shared_copy_data(document: str, stored: int) -> bytes:
    return f"{stored}\n{document}".encode()


def _authentic_shared_copy(raw: bytes) -> dict | None:
    """The key set of a shared copy when its MAC (APP_ENV_APPLICATION_SECRET) holds and it was stored
    within JWKS_SHARED_COPY_TTL_SECONDS; else None."""
    try:
        entry = json.loads(raw)
        document, stored, tag = entry["jwks"], entry["stored"], entry["mac"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(document, str) or not isinstance(stored, int) or stored + JWKS_SHARED_COPY_TTL_SECONDS < time.time():
        return None
    if not crypto.mac_verifies(_shared_copy_data(document, stored), tag, purpose=JWKS_MAC_PURPOSE):
        return None
    jwks = json.loads(document)
    return jwks if isinstance(jwks, dict) else None


jwks_cache = JWKSCache()


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
            raise TokenRejected("The Authorization header must be `Bearer <token>`.")
        try:
            text = token.decode("ascii")
        except UnicodeDecodeError:
            raise TokenRejected("The access token is malformed.") from None
        user = verify_access_token(text)
        return user, user.claims

    def authenticate_header(self, request):
        return 'Bearer realm="merchant-platform"'


# --- Service-to-service ---------------------------------------------------------------------------


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
