"""PostgreSQL goes away under load and comes back (spec 7), for one served process only: inventory
is served by `manage.py serve` (granian, pooled connections) with its DATABASE_URL through a TCP proxy
this test cuts (every open connection drops, new ones are refused) and restores, so the shared server
serving everyone else is never touched. While the database is away, requests answer 503
DATABASE_UNAVAILABLE; afterwards the same process (no restart) answers 201 again; and every purchase
order in the database has all of its lines (each create is one transaction: none is half written)."""

from __future__ import annotations

import threading
import time

import pytest
import requests
from django.db import connections
from django.db.models import Count

from apps.inventory.models import PurchaseOrder
from merchant_platform.authentication import basic_auth_header
from tests.faults.conftest import TcpProxy, free_port, wait_for_port
from tests.inventory.conftest import new_id, new_item

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]
LINES = 3


def test_database_cut_under_load_answers_503_then_recovers_without_a_restart(spawn, subprocess_env):
    merchant = new_id()
    items = [new_item(merchant) for _ in range(LINES)]
    settings = connections["default"].settings_dict
    proxy = TcpProxy((settings["HOST"], int(settings["PORT"])))
    port = free_port()
    server = spawn(
        "manage.py",
        "serve",
        "--roles",
        "web",
        env=subprocess_env(
            APP_SERVICE="inventory",
            WSGI_PORT=str(port),
            WEB_CONCURRENCY="1",
            DATABASE_URL=f"postgres://{settings['USER']}@127.0.0.1:{proxy.port}/{settings['NAME']}",
        ),
        name="inventory",
    )
    try:
        wait_for_port(port, seconds=60)
        answers: list[tuple[float, int, str, str | None]] = []  # (when, status, code, id)
        stop = threading.Event()
        body = {
            "merchantId": str(merchant),
            "supplier": "Fault Supplies",
            "currency": "EUR",
            "lines": [{"inventoryItemId": str(item.id), "quantity": 5, "unitCostAmount": 120} for item in items],
        }

        def load() -> None:
            session = requests.Session()
            session.headers["Authorization"] = basic_auth_header()
            while not stop.is_set():
                response = session.post(f"http://127.0.0.1:{port}/v1/api/inventory/purchase-orders", json=body, timeout=30)
                payload = response.json()
                answers.append((time.monotonic(), response.status_code, payload.get("code", ""), payload.get("id")))

        workers = [threading.Thread(target=load) for _ in range(4)]
        for worker in workers:
            worker.start()
        time.sleep(1.5)
        cut_at = time.monotonic()
        proxy.cut()
        time.sleep(2.0)
        restored_at = time.monotonic()
        proxy.restore()
        time.sleep(3.0)
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
    finally:
        proxy.cut()
    assert server.popen.poll() is None, "the served process died"  # recovered in place, no restart
    assert {(status, code) for _, status, code, _ in answers} <= {(201, ""), (503, "DATABASE_UNAVAILABLE")}, answers
    before = [status for when, status, _, _ in answers if when < cut_at]
    during = [status for when, status, _, _ in answers if cut_at + 0.2 < when < restored_at]
    after = [status for when, status, _, _ in answers if when > restored_at + 1.0]
    assert before and set(before) == {201}
    assert during and set(during) == {503}
    assert after and set(after) == {201}
    created = {int(order_id) for _, status, _, order_id in answers if status == 201}
    orders = set(PurchaseOrder.objects.filter(merchant_id=merchant).values_list("id", flat=True))
    assert created <= orders  # nothing answered 201 is missing
    lines = PurchaseOrder.objects.filter(merchant_id=merchant).annotate(n=Count("lines")).values_list("n", flat=True)
    assert set(lines) == {LINES}  # no order without all of its lines
