"""Payment: provider environment, attempt expiry, scheduler intervals, webhook delivery (spec 1.4, 8)."""

import os

from settings.base import ACTIVE_SERVICES, RUN_MODE, SERVICE_BASE_URL
from settings.env import APP_ENV, IS_PRODUCTION, env, refuse_to_start, secret

# Finance's base URL (its prefix): a user's transaction naming a finance account is checked there
# (merchant_platform.references), with payment's service account. Under SERVICE_BASE_URL by default.
PAYMENT_FINANCE_URL = env.str("PAYMENT_FINANCE_URL", default=f"{SERVICE_BASE_URL}/v1/api/finance").rstrip("/")

# FULL (API and worker in one, the default), API (REST only) or WORKER (no REST) (spec 1.4).
PAYMENT_MODE = env.str("PAYMENT_MODE", default="FULL").upper()
if PAYMENT_MODE not in ("FULL", "API", "WORKER"):
    raise SystemExit(f"merchant-platform: PAYMENT_MODE must be FULL, API or WORKER, got {PAYMENT_MODE!r}")
# FULL is for development only (one process, one replica); production splits payment into API and
# WORKER processes, so a production process that runs payment refuses it. A migration run
# (RUN_MODE=migrate) serves no mode, and a process of another service has no payment in it.
if IS_PRODUCTION and PAYMENT_MODE == "FULL" and RUN_MODE != "migrate" and "payment" in ACTIVE_SERVICES:
    refuse_to_start(
        "PAYMENT_MODE=FULL (the default) is for development only; with APP_ENV=production run payment as "
        "PAYMENT_MODE=API and PAYMENT_MODE=WORKER processes (allowed values: FULL, API, WORKER); refusing to start"
    )
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
# A delivery task takes its own deliveries and fills up to this many with others that are due, then
# sends them at once over at most PAYMENT_WEBHOOK_SEND_CONCURRENCY connections per worker process.
PAYMENT_WEBHOOK_BATCH_SIZE = env.int("PAYMENT_WEBHOOK_BATCH_SIZE", default=100)
PAYMENT_WEBHOOK_SEND_CONCURRENCY = env.int("PAYMENT_WEBHOOK_SEND_CONCURRENCY", default=16)
if PAYMENT_WEBHOOK_BATCH_SIZE < 1 or PAYMENT_WEBHOOK_SEND_CONCURRENCY < 1:
    raise SystemExit(
        "merchant-platform: PAYMENT_WEBHOOK_BATCH_SIZE and PAYMENT_WEBHOOK_SEND_CONCURRENCY must be >= 1, "
        f"got {PAYMENT_WEBHOOK_BATCH_SIZE} and {PAYMENT_WEBHOOK_SEND_CONCURRENCY}"
    )
# Merchants' URLs (webhook URLs, integrations' provider endpoints) on private, loopback or link-local
# addresses are refused unless this is set (development and tests, where they run on this machine).
PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = env.bool("PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS", default=False)
# How often the schedulers run (QR expiry, UNKNOWN resolution, due webhook deliveries).
PAYMENT_SCHEDULER_INTERVAL_SECONDS = env.float("PAYMENT_SCHEDULER_INTERVAL_SECONDS", default=15.0)

# Development: the fake provider scripts/run starts (`manage.py fake_provider`, on 127.0.0.1 at this
# port, signing with PAYMENT_FAKE_PROVIDER_SECRET, made once in var/dev/), and the development
# integration: a merchant without an ACTIVE integration of its own for a channel reaches that fake
# provider (docs/services/payment.md). Never outside APP_ENV=development.
PAYMENT_FAKE_PROVIDER_PORT = env.int("PAYMENT_FAKE_PROVIDER_PORT", default=8003)
PAYMENT_DEVELOPMENT_PROVIDER = env.bool("PAYMENT_DEVELOPMENT_PROVIDER", default=APP_ENV == "development")
if PAYMENT_DEVELOPMENT_PROVIDER and APP_ENV != "development":
    refuse_to_start(f"PAYMENT_DEVELOPMENT_PROVIDER is for APP_ENV=development only (APP_ENV={APP_ENV}); refusing to start")
PAYMENT_FAKE_PROVIDER_SECRET = secret("PAYMENT_FAKE_PROVIDER_SECRET") if APP_ENV == "development" else ""

# WORKER number i (PAYMENT_WORKER_NUMBER, from 0) takes snowflake worker id 91+i (spec 1.1); the
# kernel's lease then refuses to start a second process with the same id (spec 1.2.3).
PAYMENT_WORKER_ID_BASE = 91


def payment_worker_node_id(mode: str, number: int | None, node_id: str | None) -> str | None:
    """The APP_ENV_NODE_ID a split payment process must run with, or None to leave it as it is.
    Set but empty, it is `serve`'s: it gave the id to its web server and this program leases a free one."""
    if mode != "WORKER" or node_id == "":
        return None
    if number is None:
        if node_id:
            return None
        raise SystemExit("merchant-platform: PAYMENT_MODE=WORKER needs PAYMENT_WORKER_NUMBER (worker id 91+i) or APP_ENV_NODE_ID")
    if not 0 <= number <= 1023 - PAYMENT_WORKER_ID_BASE:
        raise SystemExit(f"merchant-platform: PAYMENT_WORKER_NUMBER must be 0..{1023 - PAYMENT_WORKER_ID_BASE}, got {number}")
    wanted = str(PAYMENT_WORKER_ID_BASE + number)
    if node_id and node_id.strip() != wanted:
        raise SystemExit(f"merchant-platform: WORKER number {number} takes worker id {wanted}, but APP_ENV_NODE_ID is {node_id}")
    return wanted


# The `manage.py serve` roles of a split payment process when SERVE_ROLES does not name them: API
# serves REST (and relays its outbox) without Celery beat or workers; WORKER's web server serves no
# REST (the probes, and an OpenAPI document without paths) and holds the container's worker id 91+i
# (serve gives a configured id to it).
PAYMENT_MODE_ROLES = {"API": "web,consume", "WORKER": "web,worker,beat,consume"}

PAYMENT_WORKER_NUMBER = env.int("PAYMENT_WORKER_NUMBER", default=None)
if env.str("APP_SERVICE", default="") == "payment":
    _node_id = payment_worker_node_id(PAYMENT_MODE, PAYMENT_WORKER_NUMBER, os.environ.get("APP_ENV_NODE_ID"))
    if _node_id is not None:
        os.environ["APP_ENV_NODE_ID"] = _node_id
    if PAYMENT_MODE in PAYMENT_MODE_ROLES:
        os.environ.setdefault("SERVE_ROLES", PAYMENT_MODE_ROLES[PAYMENT_MODE])

PAYMENT_OPENAPI_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        # Deliveries and refunds share PENDING/SUCCEEDED/FAILED: one enum, under the name it had
        # before refunds, so the document stays stable for its clients.
        "DeliveryStatusEnum": "apps.payment.models.WebhookDelivery.Status",
    }
}
