"""The provider times out on a refund (issue 33), on the whole platform started as processes
(tests/checkout/platform.py): a paid order, its seller refunds part of it through commerce, and the
provider takes the refund but answers after payment's read timeout. The refund stays PENDING (payment
does not know whether the money went back), and so do commerce's return and the order; nothing is
restocked or posted. The resolver (payment's periodic pass that asks the provider, querydr) is run
while the provider is unreachable (the endpoint is a proxy the test cuts): it cannot say, so it leaves
the refund PENDING, never guessed. With the provider back, the next pass hears SUCCEEDED: the refund
succeeds and the order follows (PARTIALLY_REFUNDED, its return SUCCEEDED), the goods are back on
hand and finance posts the REFUND voucher, each once.

The resolver's pass is run with `manage.py shell` in the platform's environment with no minimum
age (the periodic task asks only about refunds PENDING for two minutes: longer than any provider
call); the pass is the same service function the periodic task runs."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import pytest

from apps.payment.fake_provider import FakeProvider
from tests.checkout.platform import Api, Platform, new_seller, running_platform, wait_for
from tests.checkout.test_refund_scenario import PAYMENT, REFUND_KIND, order_of, pay, payment_refunds, place, refund, vouchers
from tests.checkout.test_scenario import DEADLINE, INVENTORY, RECEIVED, open_shop, results, stock_of
from tests.faults.conftest import TcpProxy

pytestmark = [pytest.mark.slow, pytest.mark.slow_fault, pytest.mark.timeout(600)]
PORTS = range(19650, 19700)  # this test's platform
READ_TIMEOUT_SECONDS, REFUND_DELAY_SECONDS = 1, 4  # payment gives up on the refund call before the provider answers
RESOLVE_PASS = "from apps.payment import services; print(services.refunds_resolve_pending(older_than_seconds=0))"


@dataclass
class Endpoint:
    """What open_shop reads of a provider for the merchant's integration: its URL (here the proxy's) and secret."""

    url: str
    secret: str


@pytest.fixture
def provider():
    fake = FakeProvider(secret="prov-" + secrets.token_hex(16), retry_interval_seconds=0.5).start()
    yield fake
    fake.stop()


@pytest.fixture
def platform():
    with running_platform(ports=PORTS, PAYMENT_PROVIDER_TIMEOUT_SECONDS=str(READ_TIMEOUT_SECONDS)) as started:
        yield started


def resolve_pending(platform: Platform) -> None:
    platform.manage("shell", "-c", RESOLVE_PASS)


def test_a_refund_the_provider_answered_too_late_is_resolved_by_asking_and_the_order_follows(platform: Platform, provider):
    api: Api = new_seller(platform)
    host, port = provider.url.removeprefix("http://").split(":")
    proxy = TcpProxy((host, int(port)))
    try:
        shop = open_shop(platform, api, Endpoint(f"http://127.0.0.1:{proxy.port}", provider.secret))
        order = pay(api, provider, place(api, shop, [(shop.variant_id, 3)]))
        (line,) = order["lines"]
        transaction_id = order["paymentTransactionId"]

        provider.refund_delay_seconds = REFUND_DELAY_SECONDS
        answer = refund(api, order["id"], [{"lineId": line["lineId"], "quantity": 1, "restock": True}]).json()
        assert answer["status"] == "PENDING", answer
        # The provider took the refund after payment had stopped waiting: the money went back.
        taken = wait_for(lambda: list(provider.refunds.values()), timeout=REFUND_DELAY_SECONDS + 10, message="the provider's refund")
        assert [r.status for r in taken] == ["SUCCEEDED"]

        def still_pending() -> None:
            (pending,) = payment_refunds(api, transaction_id)
            assert pending["status"] == "PENDING", pending
            transaction = api.get(f"{PAYMENT}/transactions/{transaction_id}")
            assert (transaction["status"], transaction["refundedAmount"]) == ("SETTLED", 0), transaction
            current = order_of(api, order["id"])
            assert current["status"] == "PAID" and [r["status"] for r in current["returns"]] == ["PENDING"], current
            assert stock_of(api, shop.item_id)[0] == RECEIVED - 3
            assert vouchers(api, shop.merchant_id, REFUND_KIND) == []

        still_pending()
        proxy.cut()  # the provider unreachable while the resolver asks: it cannot say, so nothing is guessed
        resolve_pending(platform)
        still_pending()

        proxy.restore()
        resolve_pending(platform)
        (settled,) = payment_refunds(api, transaction_id)
        assert settled["status"] == "SUCCEEDED" and settled["providerReference"] == taken[0].refund_no, settled
        transaction = api.get(f"{PAYMENT}/transactions/{transaction_id}")
        assert (transaction["status"], transaction["refundedAmount"]) == ("PARTIALLY_REFUNDED", settled["amount"]), transaction
        wait_for(lambda: order_of(api, order["id"])["status"] == "PARTIALLY_REFUNDED", timeout=DEADLINE, message="the order follows")
        assert [r["status"] for r in order_of(api, order["id"])["returns"]] == ["SUCCEEDED"]
        wait_for(lambda: stock_of(api, shop.item_id)[0] == RECEIVED - 2, timeout=DEADLINE, message="the unit back on hand")
        refunded = wait_for(lambda: vouchers(api, shop.merchant_id, REFUND_KIND), timeout=DEADLINE, message="the REFUND voucher")
        assert [sum(line["credit"] for line in voucher["lines"]) for voucher in refunded] == [settled["amount"]]
        returned = results(api, f"{INVENTORY}/tracking", operation="RETURN", referenceType="REFUND", referenceId=settled["id"])
        assert [row["delta"] for row in returned] == [1], returned

        resolve_pending(platform)  # another pass (or the provider's late callback) changes nothing
        assert [r["status"] for r in payment_refunds(api, transaction_id)] == ["SUCCEEDED"]
        assert api.get(f"{PAYMENT}/transactions/{transaction_id}")["refundedAmount"] == settled["amount"]
        platform.check_running()
    finally:
        proxy.cut()
