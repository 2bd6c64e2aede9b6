"""Secrets and service-to-service credentials."""

from merchant_platform.registry import active_services
from settings.env import IS_PRODUCTION, env, secret

# AES-256-GCM key material for credentials at rest; identical on every process of a service.
# Required in production unless every service of the process can do without it (licensing: spec 7).
if any(service.application_secret_required for service in active_services()):
    APP_ENV_APPLICATION_SECRET = secret("APP_ENV_APPLICATION_SECRET", dev_default="dev-only-application-secret")
else:
    APP_ENV_APPLICATION_SECRET = env.str("APP_ENV_APPLICATION_SECRET", default="" if IS_PRODUCTION else "dev-only-application-secret")

# HTTP Basic for service-to-service calls: the accounts this process accepts ("user:password,...")
# and the one it presents on outgoing calls.
SERVICE_BASIC_AUTH_ACCOUNTS = env.dict("SERVICE_BASIC_AUTH_ACCOUNTS", default={})
if not SERVICE_BASIC_AUTH_ACCOUNTS and not IS_PRODUCTION:
    SERVICE_BASIC_AUTH_ACCOUNTS = {"platform": "dev-only-service-password"}
SERVICE_BASIC_AUTH_USER = env.str("SERVICE_BASIC_AUTH_USER", default="platform")
SERVICE_BASIC_AUTH_PASSWORD = secret("SERVICE_BASIC_AUTH_PASSWORD", dev_default="dev-only-service-password")

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# TLS ends at the edge (spec 1.2): trust the gateway's forwarded scheme.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
