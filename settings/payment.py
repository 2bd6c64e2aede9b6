"""Payment: provider environment, attempt expiry, scheduler intervals, webhook delivery (spec 1.4, 8)."""

from settings.env import env

# FULL (API and worker in one, the default), API (REST only) or WORKER (no REST) (spec 1.4).
PAYMENT_MODE = env.str("PAYMENT_MODE", default="FULL").upper()
if PAYMENT_MODE not in ("FULL", "API", "WORKER"):
    raise SystemExit(f"merchant-platform: PAYMENT_MODE must be FULL, API or WORKER, got {PAYMENT_MODE!r}")
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
# Webhooks: maxRetries when a config's metadata names none; the first retry's delay (doubling, with
# jitter, at most PAYMENT_WEBHOOK_MAX_DELAY_SECONDS); each try's timeout.
PAYMENT_WEBHOOK_DEFAULT_MAX_RETRIES = env.int("PAYMENT_WEBHOOK_DEFAULT_MAX_RETRIES", default=5)
PAYMENT_WEBHOOK_RETRY_BASE_SECONDS = env.float("PAYMENT_WEBHOOK_RETRY_BASE_SECONDS", default=30.0)
PAYMENT_WEBHOOK_MAX_DELAY_SECONDS = env.float("PAYMENT_WEBHOOK_MAX_DELAY_SECONDS", default=6 * 3600.0)
PAYMENT_WEBHOOK_TIMEOUT_SECONDS = env.float("PAYMENT_WEBHOOK_TIMEOUT_SECONDS", default=5.0)
# A delivery in hand is leased for this long; a worker killed mid-delivery is redelivered after it.
PAYMENT_WEBHOOK_LEASE_SECONDS = env.float("PAYMENT_WEBHOOK_LEASE_SECONDS", default=60.0)
# Outbound webhook URLs to private, loopback or link-local addresses are refused unless this is set
# (development and tests, where the subscriber runs on this machine).
PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = env.bool("PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS", default=False)
# How often the schedulers run (QR expiry, UNKNOWN resolution, due webhook deliveries).
PAYMENT_SCHEDULER_INTERVAL_SECONDS = env.float("PAYMENT_SCHEDULER_INTERVAL_SECONDS", default=15.0)
