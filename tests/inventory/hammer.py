"""A worker process of the concurrency test (test_concurrency.py): waits for the start file, then
fires deductions, reservations and purchase-order receipts at one item as fast as it can and prints
one JSON summary line.

    python -m tests.inventory.hammer <item_id> <merchant_id> <purchase_order_id> <worker> <operations> <start_file>
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    item_id, merchant_id, purchase_order_id, worker, operations = (int(value) for value in argv[:5])
    start_file = Path(argv[5])
    import django

    django.setup()
    from apps.inventory import services
    from apps.inventory.models import Item
    from merchant_platform.errors import ApiError

    variant_id = Item.objects.get(pk=item_id).variant_id
    deadline = time.monotonic() + 60
    while not start_file.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    outcome = {"deductRequested": 0, "reserveRequested": 0, "reserveRefused": 0, "received": 0, "errors": []}
    for n in range(operations):
        order = f"w{worker}-o{n}"
        try:
            if n % 3 == 2:
                services.purchase_order_receive(
                    purchase_order_id=purchase_order_id, receipt_id=order, lines=[{"item_id": item_id, "quantity": 1}]
                )
                outcome["received"] += 1
            elif n % 3 == 1:
                outcome["reserveRequested"] += 1
                services.reservation_reserve(
                    order_id=order, merchant_id=merchant_id, lines=[{"line_id": "1", "item_id": item_id, "quantity": 1}]
                )
            else:
                outcome["deductRequested"] += 2
                services.stock_deduct_order(
                    order_id=order, merchant_id=merchant_id, lines=[{"line_id": "1", "variant_id": variant_id, "quantity": 2}]
                )
        except services.InsufficientStock:
            outcome["reserveRefused"] += 1  # all or nothing: a refused reservation changes nothing
        except ApiError as exc:
            outcome["errors"].append(f"{type(exc).__name__}: {exc.detail}")
        except Exception as exc:  # a deadlock or anything else reaching the caller fails the test
            outcome["errors"].append(f"{type(exc).__name__}: {exc}")
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings.test")
    main(sys.argv[1:])
