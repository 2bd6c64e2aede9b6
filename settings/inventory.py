"""Inventory: reservation lifetime and the expiry sweep (docs/services/inventory.md)."""

from settings.env import env

# How long a reservation of a sale-order line holds stock when the caller gives no ttlSeconds.
INVENTORY_RESERVATION_TTL_SECONDS = env.int("INVENTORY_RESERVATION_TTL_SECONDS", default=900)
if INVENTORY_RESERVATION_TTL_SECONDS <= 0:
    raise SystemExit(f"merchant-platform: INVENTORY_RESERVATION_TTL_SECONDS must be positive, got {INVENTORY_RESERVATION_TTL_SECONDS}")
# How often Celery beat releases expired reservations.
INVENTORY_RESERVATION_SWEEP_SECONDS = env.float("INVENTORY_RESERVATION_SWEEP_SECONDS", default=30.0)
# Consumer lag (records not yet committed by inventory's group, per consumer) above which the beat
# task logs inventory.consumer_lag_too_high at error level (spec 8: alert above 10,000).
INVENTORY_CONSUMER_LAG_ALERT = env.int("INVENTORY_CONSUMER_LAG_ALERT", default=10_000)
INVENTORY_CONSUMER_LAG_CHECK_SECONDS = env.float("INVENTORY_CONSUMER_LAG_CHECK_SECONDS", default=60.0)
