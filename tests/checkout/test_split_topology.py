"""The split topology (spec 1.2.1, 1.5; issue 21): every service as its own
`APP_SERVICE=<service> manage.py serve` process on a port of its own, behind nginx running
deploy/nginx/split.conf (tests/checkout/platform.py: running_split_platform), the services calling
each other on their own ports. The checkout scenario of test_scenario.py runs through the gateway
unchanged, and the requestId of the request that places the sale order (commerce calling taxation,
inventory and payment) is in the log lines of each of those four services and in no other's."""

from __future__ import annotations

import contextlib

import pytest

from tests.checkout.platform import Platform, new_seller, running_split_platform, wait_for
from tests.checkout.test_scenario import COMMERCE, checkout

pytestmark = [pytest.mark.slow, pytest.mark.slow_fault]
PORTS = range(19350, 19400)  # the split topology's ports (the checkout scenario's are 19300-19349)
# The services placing a sale order touches: commerce prices it with taxation, reserves the stock at
# inventory and opens the payment at payment (apps/commerce/sales/clients.py).
PLACING_TOUCHES = {"commerce", "taxation", "inventory", "payment"}


@pytest.fixture(scope="module")
def platform():
    with running_split_platform(ports=PORTS) as started:
        yield started


def logged(platform: Platform, service: str, request_id: str) -> bool:
    return f"requestId={request_id!r}" in platform.output(service, tail=None)


def test_checkout_through_the_split_gateway_carries_one_request_id_through_every_service(platform, provider):
    seller = new_seller(platform)
    checkout(platform, seller, provider)

    (placing,) = [
        rid for call, rid in seller.request_ids.items() if call.startswith(f"POST {COMMERCE}/sale-orders/") and call.endswith("/place")
    ]
    assert placing

    # Request lines are written in batches (LOG_REQUEST_FLUSH_SECONDS): wait for each service's.
    def missing() -> list[str]:
        return sorted(service for service in PLACING_TOUCHES if not logged(platform, service, placing))

    with contextlib.suppress(AssertionError):
        wait_for(lambda: not missing(), timeout=30, message="the placing request's id in every service it touched")
    assert not missing(), f"requestId {placing} is not in the log lines of {', '.join(missing())}"
    assert not [service for service in platform.ports if service not in PLACING_TOUCHES and logged(platform, service, placing)]
    # The gateway passed the id on to commerce, the one service it routed the request to.
    access = (platform.log_dir / "gateway" / "access.log").read_text()
    (line,) = [line for line in access.splitlines() if f"requestId={placing}" in line]
    assert f"upstream=127.0.0.1:{platform.ports['commerce']} " in line, line
