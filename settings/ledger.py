"""Ledger: asynchronous ledger documents (docs/services/ledger.md). The S3 endpoint and keys are the
platform's (S3_* in settings/messaging.py); the finance export is reached with the platform's service
credentials (SERVICE_BASIC_AUTH_USER/PASSWORD)."""

from settings.base import SERVICE_BASE_URL
from settings.env import env

# Roles of this process (spec 1.4): `api` serves REST and enqueues; `worker` runs the bridge
# consumer, the generation task and the recovery sweep. Both by default (all-in-one).
APP_ENV_APPLICATION_ROLES = tuple(
    role.strip() for role in env.str("APP_ENV_APPLICATION_ROLES", default="api,worker").split(",") if role.strip()
)
# A PROCESSING job whose run has not refreshed its heartbeat for this long is stalled; the sweep
# runs at worker start and every interval.
APP_ENV_JOB_TIMEOUT_MS = env.int("APP_ENV_JOB_TIMEOUT_MS", default=15 * 60 * 1000)
APP_ENV_SWEEP_INTERVAL_MS = env.int("APP_ENV_SWEEP_INTERVAL_MS", default=60 * 1000)
# How often a run refreshes its job's heartbeat while it works: well under APP_ENV_JOB_TIMEOUT_MS.
LEDGER_HEARTBEAT_INTERVAL_MS = env.int("LEDGER_HEARTBEAT_INTERVAL_MS", default=30 * 1000)
# Runs per request (create, retry, regenerate): a job the sweep took back this often is REJECTED.
LEDGER_MAX_ATTEMPTS = env.int("LEDGER_MAX_ATTEMPTS", default=3)
# The private bucket of the encrypted documents (created on first upload when missing; never public).
LEDGER_BUCKET = env.str("LEDGER_BUCKET", default="ledger-documents")
# Finance's base URL (its prefix), for the internal general-ledger export: under SERVICE_BASE_URL by default.
LEDGER_FINANCE_URL = env.str("LEDGER_FINANCE_URL", default=f"{SERVICE_BASE_URL}/v1/api/finance")
# Entries asked per export page (finance allows 1-1000).
LEDGER_FETCH_PAGE_SIZE = env.int("LEDGER_FETCH_PAGE_SIZE", default=1000)
# Longest custom period, in days.
LEDGER_MAX_PERIOD_DAYS = env.int("LEDGER_MAX_PERIOD_DAYS", default=366)

LEDGER_OPENAPI_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        "LedgerJobStatusEnum": "apps.ledger.models.LedgerJob.Status",
        "LedgerJobTypeEnum": "apps.ledger.models.LedgerJob.Type",
        "LedgerJobFormatEnum": "apps.ledger.models.LedgerJob.Format",
    }
}
