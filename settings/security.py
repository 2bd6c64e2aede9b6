"""Secrets and service-to-service credentials."""

from merchant_platform.registry import active_services
from settings.env import IS_LOCAL, env, secret

# AES-256-GCM key material for credentials at rest; identical on every process of a service.
# Required in production unless every service of the process can do without it (licensing: spec 7).
# Development and test make their own (settings.development).
if any(service.application_secret_required for service in active_services()) or IS_LOCAL:
    APP_ENV_APPLICATION_SECRET = secret("APP_ENV_APPLICATION_SECRET")
else:
    APP_ENV_APPLICATION_SECRET = env.str("APP_ENV_APPLICATION_SECRET", default="")

# HTTP Basic for service-to-service calls: the accounts this process accepts ("user=password,...")
# and the one it presents on outgoing calls. Development and test accept their own (random) account.
SERVICE_BASIC_AUTH_USER = env.str("SERVICE_BASIC_AUTH_USER", default="platform")
SERVICE_BASIC_AUTH_PASSWORD = secret("SERVICE_BASIC_AUTH_PASSWORD")
SERVICE_BASIC_AUTH_ACCOUNTS = env.dict("SERVICE_BASIC_AUTH_ACCOUNTS", default={})
if not SERVICE_BASIC_AUTH_ACCOUNTS and IS_LOCAL:
    SERVICE_BASIC_AUTH_ACCOUNTS = {SERVICE_BASIC_AUTH_USER: SERVICE_BASIC_AUTH_PASSWORD}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# TLS ends at the edge (spec 1.2): trust the gateway's forwarded scheme.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
