"""Commerce: product media in object storage (docs/services/commerce.md). The S3 endpoint and keys
are the platform's (S3_* in settings/messaging.py)."""

from settings.base import SERVICE_BASE_URL
from settings.env import env

# The private bucket of product images (created on first upload when missing; never public).
COMMERCE_MEDIA_BUCKET = env.str("COMMERCE_MEDIA_BUCKET", default="commerce-media")
# Largest image accepted, in bytes. The whole request must also fit MAX_REQUEST_BODY_BYTES.
COMMERCE_MEDIA_MAX_BYTES = env.int("COMMERCE_MEDIA_MAX_BYTES", default=900 * 1024)
# Lifetime of a presigned download URL.
COMMERCE_MEDIA_URL_TTL_SECONDS = env.int("COMMERCE_MEDIA_URL_TTL_SECONDS", default=300)
# Objects of deleted media are removed by a periodic sweep once deleted this long (and every that often).
COMMERCE_MEDIA_SWEEP_GRACE_SECONDS = env.int("COMMERCE_MEDIA_SWEEP_GRACE_SECONDS", default=3600)
COMMERCE_MEDIA_SWEEP_INTERVAL_SECONDS = env.int("COMMERCE_MEDIA_SWEEP_INTERVAL_SECONDS", default=900)
# Per-merchant footer summary cached in Redis this long (writes that change it invalidate it).
COMMERCE_SUMMARY_CACHE_SECONDS = env.int("COMMERCE_SUMMARY_CACHE_SECONDS", default=300)

# OpenAPI overrides of commerce, merged into SPECTACULAR_SETTINGS only where commerce is active.
COMMERCE_OPENAPI_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        "MerchantStatusEnum": "apps.commerce.models.Merchant.Status",
        "ProductStatusEnum": "apps.commerce.models.Product.Status",
        # Variants and integrations share the choice set ACTIVE/INACTIVE: one enum.
        "ActiveStatusEnum": "apps.commerce.models.ProductVariant.Status",
        "IntegrationEnvironmentEnum": "merchant_platform.models.Configuration.Environment",
        # The codes CodeField lists (a merchant's default currency and a price's currency: one enum).
        "CurrencyEnum": "apps.commerce.codes.CURRENCIES",
        "CountryEnum": "apps.commerce.codes.COUNTRIES",
    }
}
# The search index counts as behind (reads fall back to the catalog tables) when a catalog change is
# older than this and nothing was indexed since.
COMMERCE_SEARCH_STALE_SECONDS = env.int("COMMERCE_SEARCH_STALE_SECONDS", default=30)
# The worker role (spec 1.4): the product change-stream consumer and the product sync. The API role
# serves without it; all-in-one runs both.
APP_ENV_WORKERS = env.bool("APP_ENV_WORKERS", default=True)

# Sale orders (docs/services/commerce.md, "Sale orders"). The services the placing saga calls, with
# HTTP Basic service credentials (SERVICE_BASIC_AUTH_USER/PASSWORD), under SERVICE_BASE_URL by default.
COMMERCE_INVENTORY_URL = env.str("COMMERCE_INVENTORY_URL", default=f"{SERVICE_BASE_URL}/v1/api/inventory").rstrip("/")
COMMERCE_TAXATION_URL = env.str("COMMERCE_TAXATION_URL", default=f"{SERVICE_BASE_URL}/v1/api/taxation").rstrip("/")
# Finance, asked whether an order's finance account is the merchant's (merchant_platform.references).
COMMERCE_FINANCE_URL = env.str("COMMERCE_FINANCE_URL", default=f"{SERVICE_BASE_URL}/v1/api/finance").rstrip("/")
COMMERCE_PAYMENT_URL = env.str("COMMERCE_PAYMENT_URL", default=f"{SERVICE_BASE_URL}/v1/api/payment").rstrip("/")
# Where payment delivers commerce's webhooks (the subscription's id is appended).
COMMERCE_PAYMENT_WEBHOOK_URL = env.str(
    "COMMERCE_PAYMENT_WEBHOOK_URL", default=f"{SERVICE_BASE_URL}/v1/api/commerce/payment-webhooks"
).rstrip("/")
# A PLACED order unpaid this long after placing expires (and its reservation is released); the
# reservation at inventory is held a little longer, so it never lapses before the order does.
COMMERCE_ORDER_PAYMENT_WINDOW_SECONDS = env.int("COMMERCE_ORDER_PAYMENT_WINDOW_SECONDS", default=1800)
COMMERCE_ORDER_EXPIRY_SWEEP_SECONDS = env.int("COMMERCE_ORDER_EXPIRY_SWEEP_SECONDS", default=60)
COMMERCE_ORDER_MAX_LINES = env.int("COMMERCE_ORDER_MAX_LINES", default=100)
