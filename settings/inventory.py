"""Inventory: reservation lifetime and the expiry sweep (docs/services/inventory.md)."""

from settings.env import env

# How long a reservation of a sale-order line holds stock when the caller gives no ttlSeconds.
INVENTORY_RESERVATION_TTL_SECONDS = env.int("INVENTORY_RESERVATION_TTL_SECONDS", default=900)
if INVENTORY_RESERVATION_TTL_SECONDS <= 0:
    raise SystemExit(f"merchant-platform: INVENTORY_RESERVATION_TTL_SECONDS must be positive, got {INVENTORY_RESERVATION_TTL_SECONDS}")
# How often Celery beat releases expired reservations.
INVENTORY_RESERVATION_SWEEP_SECONDS = env.float("INVENTORY_RESERVATION_SWEEP_SECONDS", default=30.0)
