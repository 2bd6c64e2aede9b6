"""Taxation: where `manage.py resync_tax` reads commerce's products (docs/services/taxation.md)."""

from settings.env import env

# Commerce's API prefix as taxation reaches it (the gateway, or commerce's own listener in split mode).
TAXATION_COMMERCE_URL = env.str("TAXATION_COMMERCE_URL", default="http://127.0.0.1:8000/v1/api/commerce").rstrip("/")

TAXATION_OPENAPI_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        "RoundingModeEnum": "apps.taxation.models.RoundingPolicy.Mode",
        "TaxSetStatusEnum": "apps.taxation.models.TaxSet.Status",
    }
}
