"""Payment: provider environment, attempt expiry, scheduler intervals, webhook delivery (spec 1.4, 8)."""

from settings.env import env

# FULL (API and worker in one, the default), API (REST only) or WORKER (no REST) (spec 1.4).
PAYMENT_MODE = env.str("PAYMENT_MODE", default="FULL").upper()
# Which integration environment (Configuration.environment) the provider credentials are read from.
PAYMENT_PROVIDER_ENVIRONMENT = env.str("PAYMENT_PROVIDER_ENVIRONMENT", default="sandbox")
# Where providers call back: the public base address of /api/pay/... (the gateway).
PAYMENT_IPN_BASE_URL = env.str("PAYMENT_IPN_BASE_URL", default="http://127.0.0.1:8000")
# A QR attempt not paid within this time becomes EXPIRED.
PAYMENT_QR_EXPIRY_SECONDS = env.int("PAYMENT_QR_EXPIRY_SECONDS", default=900)
# Provider call timeouts (connect, read): a read timeout leaves the attempt UNKNOWN.
PAYMENT_PROVIDER_TIMEOUT_SECONDS = env.float("PAYMENT_PROVIDER_TIMEOUT_SECONDS", default=10.0)
# Largest IPN body accepted.
PAYMENT_IPN_MAX_BODY_BYTES = env.int("PAYMENT_IPN_MAX_BODY_BYTES", default=8192)
