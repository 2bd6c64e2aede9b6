"""Authentication and authorization: the token verifier every service runs, the policy cache, and
identity's own settings (signing keys, token lifetimes, OTP limits, mail and SMS delivery).

See docs/authentication.md (verifier, policies) and docs/services/identity.md (identity).
"""

from pathlib import Path

from settings.env import IS_PRODUCTION, env

_BASE_DIR = Path(__file__).resolve().parent.parent

# --- Verifier (every service) ---------------------------------------------------------------------
# Where verifiers fetch identity's key set: through the gateway by default (all-in-one mode reads the
# in-process key ring of identity instead, see merchant_platform/verification/jwks.py).
IDENTITY_JWKS_URL = env.str("IDENTITY_JWKS_URL", default="http://127.0.0.1:8000/jw-certs")
JWT_ISSUER = env.str("JWT_ISSUER", default="merchant-platform-identity")
JWT_AUDIENCE = env.str("JWT_AUDIENCE", default="merchant-platform")
JWT_LEEWAY_SECONDS = env.int("JWT_LEEWAY_SECONDS", default=30)
# An unknown `kid` triggers a refetch, at most one fetch per JWKS_REFETCH_MIN_INTERVAL_SECONDS per
# process (a flood of made-up kids cannot hammer identity, and a new real kid is found within about
# a second); a kid the fetched key set did not hold is not refetched for JWKS_UNKNOWN_KID_TTL_SECONDS.
# A cached key set older than JWKS_MAX_AGE_SECONDS is refreshed in the background and kept while
# identity cannot be reached.
JWKS_REFETCH_MIN_INTERVAL_SECONDS = env.float("JWKS_REFETCH_MIN_INTERVAL_SECONDS", default=1.0)
JWKS_UNKNOWN_KID_TTL_SECONDS = env.float("JWKS_UNKNOWN_KID_TTL_SECONDS", default=10.0)
JWKS_MAX_AGE_SECONDS = env.int("JWKS_MAX_AGE_SECONDS", default=3600)
JWKS_FETCH_TIMEOUT_SECONDS = env.float("JWKS_FETCH_TIMEOUT_SECONDS", default=2.0)

# --- Policy engine (every service) ----------------------------------------------------------------
AUTHZ_CACHE_TTL_SECONDS = env.int("AUTHZ_CACHE_TTL_SECONDS", default=600)
# Lifetime of a user's grants kept in process while Redis is down (inventory only, spec 1.3).
AUTHZ_LOCAL_CACHE_TTL_SECONDS = env.int("AUTHZ_LOCAL_CACHE_TTL_SECONDS", default=5)

# --- Identity -------------------------------------------------------------------------------------
# A PEM file, or a directory of `<name>.pem` files for rotation (docs/services/identity.md).
IDENTITY_SIGNING_KEY_PATH = env.path("IDENTITY_SIGNING_KEY_PATH", default=str(_BASE_DIR / "var" / "keys" / "identity"))
IDENTITY_ACCESS_TOKEN_TTL_SECONDS = env.int("IDENTITY_ACCESS_TOKEN_TTL_SECONDS", default=900)
IDENTITY_REFRESH_TOKEN_TTL_SECONDS = env.int("IDENTITY_REFRESH_TOKEN_TTL_SECONDS", default=30 * 24 * 3600)
IDENTITY_DEFAULT_PHONE_REGION = env.str("IDENTITY_DEFAULT_PHONE_REGION", default="") or None
IDENTITY_PASSWORD_MIN_LENGTH = env.int("IDENTITY_PASSWORD_MIN_LENGTH", default=10)

# argon2id parameters (argon2-cffi): OWASP's recommended minimum (19 MiB, 2 passes, 1 lane), sized for a
# 2-core web server; docs/services/identity.md gives the measured cost.
IDENTITY_ARGON2_TIME_COST = env.int("IDENTITY_ARGON2_TIME_COST", default=2)
IDENTITY_ARGON2_MEMORY_COST_KIB = env.int("IDENTITY_ARGON2_MEMORY_COST_KIB", default=19456)
IDENTITY_ARGON2_PARALLELISM = env.int("IDENTITY_ARGON2_PARALLELISM", default=1)

# Sign-in brute-force protection (counted in Redis; a per-process fallback when Redis is down).
IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER = env.int("IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER", default=10)
IDENTITY_SIGNIN_MAX_FAILURES_PER_IP = env.int("IDENTITY_SIGNIN_MAX_FAILURES_PER_IP", default=100)
IDENTITY_SIGNIN_FAILURE_WINDOW_SECONDS = env.int("IDENTITY_SIGNIN_FAILURE_WINDOW_SECONDS", default=900)

# Refresh: a rotated refresh token presented again within this many seconds of its rotation (two
# tabs refreshing at once) gets the same new pair instead of revoking its family (docs/authentication.md).
IDENTITY_REFRESH_REUSE_GRACE_SECONDS = env.int("IDENTITY_REFRESH_REUSE_GRACE_SECONDS", default=10)

# One-time passwords (spec 5 and 8).
IDENTITY_OTP_LENGTH = env.int("IDENTITY_OTP_LENGTH", default=6)
IDENTITY_OTP_TTL_SECONDS = env.int("IDENTITY_OTP_TTL_SECONDS", default=600)
IDENTITY_OTP_MAX_ATTEMPTS = env.int("IDENTITY_OTP_MAX_ATTEMPTS", default=5)
IDENTITY_OTP_LOCKOUT_SECONDS = env.int("IDENTITY_OTP_LOCKOUT_SECONDS", default=900)
IDENTITY_OTP_RESEND_COOLDOWN_SECONDS = env.int("IDENTITY_OTP_RESEND_COOLDOWN_SECONDS", default=60)
IDENTITY_OTP_DAILY_QUOTA = env.int("IDENTITY_OTP_DAILY_QUOTA", default=10)

# Mail: EMAIL_URL (smtp://user:password@host:port, smtp+tls://, smtp+ssl://); empty disables mail.
EMAIL_URL = env.str("EMAIL_URL", default="")
IDENTITY_MAIL_ENABLED = bool(EMAIL_URL)
_email = env.email_url_config(EMAIL_URL) if EMAIL_URL else {}
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = _email.get("EMAIL_HOST") or "localhost"
EMAIL_PORT = _email.get("EMAIL_PORT") or 25
EMAIL_HOST_USER = _email.get("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = _email.get("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = bool(_email.get("EMAIL_USE_TLS"))
EMAIL_USE_SSL = bool(_email.get("EMAIL_USE_SSL"))
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Merchant Platform <no-reply@merchant-platform.local>")

# SMS: "http" (a JSON HTTP provider), "console" (development only) or empty (SMS disabled).
SMS_PROVIDER = env.str("SMS_PROVIDER", default="").lower()
if SMS_PROVIDER == "console" and IS_PRODUCTION:
    SMS_PROVIDER = ""
SMS_HTTP_URL = env.str("SMS_HTTP_URL", default="")
SMS_HTTP_TOKEN = env.str("SMS_HTTP_TOKEN", default="")
SMS_SENDER = env.str("SMS_SENDER", default="MerchantPlatform")

# Proxies whose X-Forwarded-For is believed when identity counts failures per client IP (the same
# variable the ASGI server reads); "*" trusts every peer.
TRUSTED_PROXY_IPS = env.list("FORWARDED_ALLOW_IPS", default=["127.0.0.1", "::1"])
