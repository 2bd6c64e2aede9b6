"""Inventory without Redis (spec 1.3, docs/services/inventory.md "Without Redis"): inventory's
processes with REDIS_URL pointing at a closed port start and serve. The web process answers readyz
200 "degraded" naming redis, reads stock for a user whose token it verifies against identity's key
set (identity up) and whose policies it reads from PostgreSQL, and takes a reservation; its worker
id is leased in PostgreSQL (`snowflake_lease`). A second process (`manage.py inventory_periodic`,
the periodic work without Celery, whose broker is Redis) leases another id, expires the reservation
and a third process configured with the first one's id refuses to start."""

from __future__ import annotations

import re

import pytest
import requests

from apps.inventory.models import Reservation
from merchant_platform import snowflake
from merchant_platform.models import SnowflakeLease
from merchant_platform.verification.service_accounts import basic_auth_header
from tests.inventory.conftest import new_id, new_item
from tests.support.auth import make_caller, signing_key
from tests.support.http import JsonHandler, local_server
from tests.support.ports import free_port, wait_for_port
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]

PREFIX = "/v1/api/inventory"
LEASED = re.compile(r"event='snowflake.worker_leased' .*workerId=(?P<worker_id>\d+) holder='(?P<holder>[^']+)'")


@pytest.fixture
def identity_key_set():
    """identity's /jw-certs as a verifier sees it: the test signing key's public half."""
    keys = {"keys": [signing_key().public_jwk]}

    class KeySet(JsonHandler):
        def answer(self, path):
            return 200, keys

    with local_server(KeySet) as url:
        yield f"{url}/jw-certs"


def _lease_of(process) -> SnowflakeLease:
    """The process's lease as its `snowflake.worker_leased` line names it, read from PostgreSQL."""
    found = wait_for(lambda: LEASED.search(process.output), timeout=60, message="the process to lease a worker id")
    return SnowflakeLease.objects.get(worker_id=int(found["worker_id"]), holder=found["holder"])


def test_inventory_starts_and_serves_with_redis_down(spawn, subprocess_env, identity_key_set):
    merchant = new_id()
    lamp = new_item(merchant, on_hand=5)
    caller = make_caller(permissions=[("inventory.Stock.read", merchant)], joined=[merchant])
    without_redis = {
        "APP_SERVICE": "inventory",
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "IDENTITY_JWKS_URL": identity_key_set,
    }
    port = free_port()
    web = spawn(
        "manage.py", "serve", "--roles", "web", env=subprocess_env(**without_redis, WSGI_PORT=str(port), WEB_CONCURRENCY="1"), name="web"
    )
    wait_for_port(port, seconds=60)
    base = f"http://127.0.0.1:{port}{PREFIX}"

    ready = requests.get(f"{base}/readyz", timeout=30)
    assert ready.status_code == 200, ready.text
    assert (ready.json()["status"], ready.json()["degraded"]) == ("degraded", ["redis"])
    assert ready.json()["checks"]["database:inventory"] == "ok"

    stock = requests.get(
        f"{base}/stock", params={"inventoryItemId": str(lamp.id)}, headers={"Authorization": f"Bearer {caller.token}"}, timeout=30
    )
    assert stock.status_code == 200, stock.text
    assert [(row["quantityOnHand"], row["available"]) for row in stock.json()["results"]] == [(5, 5)]

    body = {
        "orderId": "SO-NR-1",
        "merchantId": str(merchant),
        "lines": [{"lineId": "1", "inventoryItemId": str(lamp.id), "quantity": 2}],
        "ttlSeconds": 1,
    }
    reserved = requests.post(f"{base}/internal/reservations", json=body, headers={"Authorization": basic_auth_header()}, timeout=30)
    assert reserved.status_code == 201, reserved.text
    (reservation,) = reserved.json()

    # The web process leased its id in PostgreSQL, and wrote the reservation with it.
    web_lease = _lease_of(web)
    assert snowflake.parse(int(reservation["id"]))["worker_id"] == web_lease.worker_id

    # The periodic work without Celery: another process, another id, and the reservation expires.
    periodic = spawn(
        "manage.py", "inventory_periodic", env=subprocess_env(**without_redis, INVENTORY_RESERVATION_SWEEP_SECONDS="0.5"), name="periodic"
    )
    periodic_lease = _lease_of(periodic)
    assert periodic_lease.worker_id != web_lease.worker_id
    wait_for(
        lambda: Reservation.objects.get(pk=int(reservation["id"])).status == Reservation.Status.EXPIRED,
        timeout=60,
        message="the periodic process to expire the reservation",
    )

    # A process configured with the web process's id finds it leased in PostgreSQL and refuses.
    twin = spawn(
        "manage.py",
        "inventory_periodic",
        "--once",
        env=subprocess_env(**without_redis, APP_ENV_NODE_ID=str(web_lease.worker_id)),
        name="twin",
    )
    assert twin.wait(60) == 1, twin.output
    assert f"snowflake worker id {web_lease.worker_id} (APP_ENV_NODE_ID) is already leased by {web_lease.holder}" in twin.output
