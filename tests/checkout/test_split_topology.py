"""The split topology (spec 1.2.1, 1.4, 1.5; issues 21 and 34): every service as its own
`APP_SERVICE=<service> manage.py serve` process on a port of its own, payment as an API process
and a WORKER process (worker id 91) as deploy/compose.yaml runs it, behind nginx running
deploy/nginx/split.conf (tests/checkout/platform.py: running_split_platform), the services calling
each other on their own ports. The checkout scenario of test_scenario.py runs through the gateway
unchanged; then a request's id is followed through the processes' logs: the placing request's over
HTTP (commerce calling taxation, inventory and payment's API), the provider's IPN's through Celery
and Kafka (the webhook task on payment's WORKER, the payment.success consumers of inventory and
finance)."""

from __future__ import annotations

import contextlib

import pytest
import requests

from tests.checkout.platform import Platform, new_seller, running_split_platform, wait_for
from tests.checkout.test_scenario import COMMERCE, checkout

# The timeout counts the module's setup: migrating and starting 41 processes took up to 4 minutes on
# this 2-core machine at a load average of 16 (docs/operations.md), close to the suite's 300 s.
pytestmark = [pytest.mark.slow, pytest.mark.slow_fault, pytest.mark.timeout(480)]
PORTS = range(19350, 19400)  # the split topology's ports (the checkout scenario's are 19300-19349)
# Placing prices the order at taxation, reserves the stock at inventory and opens the payment at
# payment (apps/commerce/sales/clients.py).
PLACING_TOUCHES = {"commerce", "taxation", "inventory", "payment"}
# The IPN confirms the attempt at payment's API, whose WORKER sends the webhook; its payment.success
# event inventory (the deduction) and finance (the SALE voucher) consume.
IPN_TOUCHES = {"payment", "payment-worker-0", "inventory", "finance"}


@pytest.fixture(scope="module")
def platform():
    with running_split_platform(ports=PORTS) as started:
        yield started


def assert_only_these_logged(platform: Platform, request_id: str, services: set[str]) -> None:
    """`request_id` is in the log lines of each of `services` (processes: a service's, or payment's
    WORKER) and of no other."""

    def logged_by() -> set[str]:
        return {process for process in platform.ports if request_id in platform.output(process, tail=None)}

    # Request lines are written in batches (LOG_REQUEST_FLUSH_SECONDS), consumers log after commit.
    with contextlib.suppress(AssertionError):
        wait_for(lambda: logged_by() >= services, timeout=30, message=f"requestId {request_id} in the logs of {sorted(services)}")
    assert logged_by() == services, f"requestId {request_id}: expected in the logs of {sorted(services)}, found in {sorted(logged_by())}"


def gateway_lines(platform: Platform, needle: str) -> list[str]:
    return [line for line in (platform.log_dir / "gateway" / "access.log").read_text().splitlines() if needle in line]


def test_checkout_through_the_split_gateway_carries_each_request_id_through_the_services_it_touched(platform, provider):
    seller = new_seller(platform)
    checkout(platform, seller, provider)

    (placing,) = [
        rid for call, rid in seller.request_ids.items() if call.startswith(f"POST {COMMERCE}/sale-orders/") and call.endswith("/place")
    ]
    assert placing
    # The gateway made the id and sent it to commerce, the one service it routed the request to.
    (line,) = gateway_lines(platform, f"requestId={placing}")
    assert f"upstream=127.0.0.1:{platform.ports['commerce']} " in line, line
    assert_only_these_logged(platform, placing, PLACING_TOUCHES)

    # The provider sends no X-Request-Id: the gateway made the IPN's id (the last IPN is the one
    # the provider saw accepted, checkout() asserts).
    ipn = gateway_lines(platform, "POST /api/pay/")[-1].rsplit("requestId=", 1)[1]
    assert_only_these_logged(platform, ipn, IPN_TOUCHES)


def test_payments_worker_holds_worker_id_91_and_answers_the_probes_only(platform):
    """Spec 1.1 and 1.4: WORKER number 0 runs with worker id 91 and serves no REST; the gateway's
    payment routes reach the API process."""
    worker = f"http://127.0.0.1:{platform.ports['payment-worker-0']}/v1/api/payment"
    assert requests.get(f"{worker}/healthz", timeout=10).status_code == 200
    assert requests.get(f"{worker}/transactions", timeout=10).status_code == 404
    assert "event='snowflake.worker_leased' logger='merchant_platform.snowflake' workerId=91 " in platform.output(
        "payment-worker-0", tail=None
    )
    assert "workerId=91 " not in platform.output("payment", tail=None)
