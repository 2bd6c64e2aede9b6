"""Taxation: where `manage.py resync_tax` reads commerce's products (docs/services/taxation.md)."""

from settings.base import SERVICE_BASE_URL
from settings.env import env

# Commerce's API prefix as taxation reaches it (under SERVICE_BASE_URL by default, or commerce's own listener).
TAXATION_COMMERCE_URL = env.str("TAXATION_COMMERCE_URL", default=f"{SERVICE_BASE_URL}/v1/api/commerce").rstrip("/")

TAXATION_OPENAPI_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        "RoundingModeEnum": "apps.taxation.models.RoundingPolicy.Mode",
        "TaxSetStatusEnum": "apps.taxation.models.TaxSet.Status",
    }
}
