"""Refunds in the books (issue 33): the REFUND voucher of a succeeded refund (payment.refunded) and
the COGS_RETURN voucher of its restocked goods (inventory.returned), through the service functions
and through the real consumers on the real broker, with payloads valid under the producers'
contracts (merchant_platform/messaging/contracts.py)."""

from __future__ import annotations

import datetime
import json

import pytest

from apps.finance import services
from apps.finance.consumers import REFUND_CONSUMER, RETURNED_CONSUMER
from apps.finance.models import Account, ProcessedMessage, Voucher
from merchant_platform.errors import Conflict, InvalidInput
from merchant_platform.messaging import contracts, topics
from tests.finance.conftest import books, invariant_violations
from tests.support.auth import make_caller
from tests.support.broker import produce, read_topic, unique
from tests.support.consumers import consumer_spec
from tests.support.waiting import wait_for

TRANSACTION_ID = "7390172837500001"
LAMP = "7390172837490688"
SUCCEEDED_AT = "2026-11-27T09:30:00.000Z"
API = "/v1/api/finance"


def refunded(
    merchant_id: int,
    finance_account_id: int | None,
    *,
    refund_id: int,
    amount: int,
    tax_amount: int = 0,
    currency: str = "EUR",
    paid_amount: int = 1200,
    transaction_tax: int | None = 200,
    reason: str = "Arrived broken",
) -> dict:
    """A payment.refunded message as payment emits it (contract PAYMENT_REFUNDED): the succeeded
    refund and its transaction as it stands after it."""
    account = None if finance_account_id is None else str(finance_account_id)
    transaction = {
        "id": TRANSACTION_ID,
        "merchantId": str(merchant_id),
        "sourceType": "ORDER",
        "sourceId": "SO-1042",
        "amount": paid_amount,
        "paidAmount": paid_amount,
        "taxAmount": transaction_tax,
        "currency": currency,
        "financeAccountId": account,
        "lines": [{"lineId": "1", "variantId": LAMP, "quantity": 2}],
        "status": "REFUNDED" if amount == paid_amount else "PARTIALLY_REFUNDED",
        "createdAt": "2026-11-25T13:00:00.000Z",
        "settledAt": "2026-11-25T13:00:05.000Z",
        "cancelledAt": None,
        "refundedAmount": amount,
    }
    refund = {
        "id": str(refund_id),
        "transactionId": TRANSACTION_ID,
        "merchantId": str(merchant_id),
        "sourceType": "ORDER",
        "sourceId": "SO-1042",
        "financeAccountId": account,
        "amount": amount,
        "taxAmount": tax_amount,
        "currency": currency,
        "reason": reason,
        "status": "SUCCEEDED",
        "providerReference": f"re_{refund_id}",
        "failureReason": None,
        "requestedBy": None,
        "lines": [{"lineId": "1", "variantId": LAMP, "quantity": 1, "restock": True, "locationId": None}],
        "createdAt": "2026-11-27T09:29:58.000Z",
        "succeededAt": SUCCEEDED_AT,
        "failedAt": None,
    }
    return {"event": "refund.succeeded", "timestamp": SUCCEEDED_AT, "source": "payment", "transaction": transaction, "refund": refund}


def returned(merchant_id: int, *, refund_id: int, costs: tuple[int, ...] = (300, 400), currency: str = "EUR") -> dict:
    """An inventory.returned message as inventory emits it (contract INVENTORY_RETURNED): a refund's
    restocked lines costed at the unit cost of their deduction."""
    lines = [
        {
            "lineId": str(number),
            "itemId": str(7390172837460000 + number),
            "variantId": str(7390172837490000 + number),
            "locationId": "7390172837480001",
            "quantity": 1,
            "unitCostAmount": cost,
            "costAmount": cost,
            "trackingId": str(7390172837470000 + number),
        }
        for number, cost in enumerate(costs, start=1)
    ]
    return {
        "refundId": str(refund_id),
        "orderId": "SO-1042",
        "merchantId": str(merchant_id),
        "currency": currency,
        "totalCostAmount": sum(costs),
        "lines": lines,
    }


def _lines(voucher: Voucher) -> set[tuple[str, str, int, int]]:
    return {(line.account.system_role, line.currency, line.debit, line.credit) for line in voucher.lines.select_related("account")}


def _sale_and_refund_books():
    """A merchant who sold for 1200 (VAT 200 included) into CASH."""
    chart = books()
    services.sale_post_from_payment(
        finance_account_id=chart["CASH"].id, merchant_id=chart["CASH"].merchant_id, amount=1200, tax_amount=200, attempt_id="att-1"
    )
    return chart


def _refund(chart, **fields):
    return {
        "refund_id": 7391000000000001,
        "transaction_id": int(TRANSACTION_ID),
        "finance_account_id": chart["CASH"].id,
        "merchant_id": chart["CASH"].merchant_id,
        "amount": 600,
        "tax_amount": 100,
        "currency": "EUR",
        "reason": "Arrived broken",
        **fields,
    }


# --- The service functions ---------------------------------------------------------------------


@pytest.mark.django_db(databases="__all__")
class TestRefundVoucher:
    def test_a_partial_refund_reverses_the_sale_for_its_amount_tax_included(self):
        chart = _sale_and_refund_books()
        voucher = services.refund_post(**_refund(chart), date=datetime.date(2026, 11, 27))
        assert (voucher.kind, voucher.source_type, voucher.source_id, voucher.date) == (
            "REFUND",
            "payment-refund",
            "7391000000000001",
            datetime.date(2026, 11, 27),
        )
        assert voucher.memo == f"Refund 7391000000000001 of payment transaction {TRANSACTION_ID}: Arrived broken"
        lines = _lines(voucher)
        assert lines == {("SALES", "EUR", 500, 0), ("TAX_PAYABLE", "EUR", 100, 0), ("CASH", "EUR", 0, 600)}
        assert sum(d for *_, d, _ in lines) == sum(c for *_, c in lines) == 600
        balances = {role: Account.objects.get(pk=chart[role].pk).balance for role in ("CASH", "SALES", "TAX_PAYABLE")}
        assert balances == {"CASH": 600, "SALES": 500, "TAX_PAYABLE": 100}
        assert invariant_violations([chart["CASH"].merchant_id]) == []

    def test_refunding_everything_brings_every_account_back_to_zero(self):
        chart = _sale_and_refund_books()
        services.refund_post(**_refund(chart, refund_id=1, amount=700, tax_amount=117))
        services.refund_post(**_refund(chart, refund_id=2, amount=500, tax_amount=83))
        assert {role: Account.objects.get(pk=chart[role].pk).balance for role in ("CASH", "SALES", "TAX_PAYABLE")} == {
            "CASH": 0,
            "SALES": 0,
            "TAX_PAYABLE": 0,
        }

    def test_a_refund_without_tax_or_all_of_it_tax_has_two_lines(self):
        chart = _sale_and_refund_books()
        untaxed = services.refund_post(**_refund(chart, refund_id=1, amount=300, tax_amount=0))
        all_tax = services.refund_post(**_refund(chart, refund_id=2, amount=50, tax_amount=50))
        assert _lines(untaxed) == {("SALES", "EUR", 300, 0), ("CASH", "EUR", 0, 300)}
        assert _lines(all_tax) == {("TAX_PAYABLE", "EUR", 50, 0), ("CASH", "EUR", 0, 50)}

    def test_a_refund_posts_once_whatever_the_redeliveries(self, log_lines):
        chart = _sale_and_refund_books()
        first = services.refund_post(**_refund(chart))
        again = services.refunds_post(refunds=[_refund(chart), _refund(chart)])
        assert [v.id for v in again] == [first.id, first.id]
        assert Voucher.objects.filter(merchant_id=chart["CASH"].merchant_id, kind="REFUND").count() == 1
        assert Account.objects.get(pk=chart["CASH"].pk).balance == 600
        assert log_lines.matching("finance.voucher.idempotent_replay", str(first.id))

    def test_another_merchants_finance_account_is_refused_and_nothing_is_posted(self):
        mine, theirs = _sale_and_refund_books(), books()
        with pytest.raises(services.ForeignReference, match="another merchant than the refund's"):
            services.refund_post(**_refund(mine, finance_account_id=theirs["CASH"].id))
        assert not Voucher.objects.filter(kind="REFUND", merchant_id__in=[mine["CASH"].merchant_id, theirs["CASH"].merchant_id]).exists()

    def test_a_tax_above_the_amount_is_refused(self):
        chart = _sale_and_refund_books()
        with pytest.raises(InvalidInput, match="taxAmount"):
            services.refund_post(**_refund(chart, amount=100, tax_amount=101))
        assert not Voucher.objects.filter(merchant_id=chart["CASH"].merchant_id, kind="REFUND").exists()

    def test_a_usd_refund_of_an_eur_account_uses_the_usd_accounts(self):
        chart = books()
        merchant = chart["BANK"].merchant_id
        services.sale_post_from_payment(
            finance_account_id=chart["BANK"].id, merchant_id=merchant, amount=2500, tax_amount=500, currency="USD", attempt_id="usd-1"
        )
        voucher = services.refund_post(**_refund(chart, finance_account_id=chart["BANK"].id, amount=1000, tax_amount=200, currency="USD"))
        assert _lines(voucher) == {("SALES", "USD", 800, 0), ("TAX_PAYABLE", "USD", 200, 0), ("BANK", "USD", 0, 1000)}
        usd = {a.system_role: a.balance for a in Account.objects.filter(merchant_id=merchant, currency="USD")}
        assert (usd["BANK"], usd["SALES"], usd["TAX_PAYABLE"]) == (1500, 1200, 300)
        assert Account.objects.get(pk=chart["BANK"].pk).balance == 0
        assert invariant_violations([merchant]) == []

    def test_a_batch_of_refunds_of_two_merchants_posts_each_once_and_keeps_the_invariants(self):
        charts = [_sale_and_refund_books(), _sale_and_refund_books()]
        refunds = [_refund(charts[n % 2], refund_id=1000 + n, amount=10 + n, tax_amount=n % 3) for n in range(60)]
        vouchers = services.refunds_post(refunds=refunds + refunds[:5])
        assert len({v.id for v in vouchers}) == 60
        merchants = [chart["CASH"].merchant_id for chart in charts]
        assert invariant_violations(merchants) == []
        assert Account.objects.get(pk=charts[0]["CASH"].pk).balance == 1200 - sum(10 + n for n in range(0, 60, 2))

    def test_a_refund_is_corrected_by_an_adjustment_not_voided(self):
        chart = _sale_and_refund_books()
        voucher = services.refund_post(**_refund(chart))
        with pytest.raises(Conflict) as refused:
            services.voucher_void(voucher_id=voucher.id)
        assert refused.value.code == "VOUCHER_NOT_VOIDABLE"
        correction = services.voucher_correct(voucher_id=voucher.id)
        assert (correction.kind, correction.reason) == ("ADJUSTMENT", "correction")
        assert Account.objects.get(pk=chart["CASH"].pk).balance == 1200


@pytest.mark.django_db(databases="__all__")
class TestCogsReturnVoucher:
    def test_the_returned_cost_moves_from_cogs_back_to_inventory_once(self):
        chart = books()
        merchant = chart["COGS"].merchant_id
        services.cogs_post(merchant_id=merchant, order_id="SO-1042", currency="EUR", amount=1400)
        returned_cost = {"merchant_id": merchant, "refund_id": 7391000000000001, "order_id": "SO-1042", "currency": "EUR", "amount": 700}
        voucher = services.cogs_return_post(**returned_cost)
        assert (voucher.kind, voucher.source_type, voucher.source_id) == ("COGS_RETURN", "inventory-returned", "7391000000000001/EUR")
        assert voucher.memo == "Cost of goods returned, refund 7391000000000001 of order SO-1042"
        assert _lines(voucher) == {("INVENTORY", "EUR", 700, 0), ("COGS", "EUR", 0, 700)}
        assert services.cogs_return_post(**returned_cost).id == voucher.id
        assert (Account.objects.get(pk=chart["COGS"].pk).balance, Account.objects.get(pk=chart["INVENTORY"].pk).balance) == (700, -700)
        assert invariant_violations([merchant]) == []

    def test_a_zero_cost_posts_nothing_and_a_usd_cost_its_usd_accounts(self, log_lines):
        chart = books()
        merchant = chart["COGS"].merchant_id
        returns = [
            {"merchant_id": merchant, "refund_id": 1, "order_id": "SO-1", "currency": "", "amount": 0},
            {"merchant_id": merchant, "refund_id": 2, "order_id": "SO-2", "currency": "USD", "amount": 250},
        ]
        nothing, usd = services.cogs_returns_post(returns=returns)
        assert nothing is None and log_lines.matching("finance.cogs_return.zero_cost_skipped")
        assert _lines(usd) == {("INVENTORY", "USD", 250, 0), ("COGS", "USD", 0, 250)}


@pytest.mark.django_db(databases="__all__")
def test_the_reports_show_the_refund(seeded):
    """Over HTTP: the voucher list filters REFUND and COGS_RETURN vouchers, the cash account's
    statement shows the refund with its kind and memo, the trial balance the revenue and tax net of it."""
    chart = _sale_and_refund_books()
    merchant = chart["CASH"].merchant_id
    refund = services.refund_post(**_refund(chart))
    services.cogs_return_post(merchant_id=merchant, refund_id=7391000000000001, order_id="SO-1042", currency="EUR", amount=350)
    client = make_caller(roles=["OWNER"], merchants=[merchant]).client()
    listed = client.get(f"{API}/vouchers", {"merchantId": str(merchant), "kind": "REFUND"}).json()["results"]
    assert [(v["voucherNumber"], v["kind"], v["sourceType"], v["voidable"]) for v in listed] == [
        (refund.voucher_number, "REFUND", "payment-refund", False)
    ]
    returns = client.get(f"{API}/vouchers", {"merchantId": str(merchant), "kind": "COGS_RETURN"}).json()["results"]
    assert [v["kind"] for v in returns] == ["COGS_RETURN"]
    today = refund.date.isoformat()
    response = client.get(f"{API}/accounts/{chart['CASH'].id}/statement", {"dateFrom": today, "dateTo": today})
    entries = json.loads(b"".join(response.streaming_content))["entries"]
    assert [(e["kind"], e["line"]["credit"], e["runningBalance"]) for e in entries] == [("SALE", 0, 1200), ("REFUND", 600, 600)]
    assert entries[1]["memo"].startswith(f"Refund 7391000000000001 of payment transaction {TRANSACTION_ID}")
    trial = client.get(f"{API}/reports/trial-balance", {"merchantId": str(merchant)}).json()
    balances = {row["account"]["systemRole"]: row["balance"] for row in trial["accounts"]}
    assert (balances["CASH"], balances["SALES"], balances["TAX_PAYABLE"], balances["COGS"], balances["INVENTORY"]) == (
        600,
        500,
        100,
        -350,
        350,
    )
    assert trial["totals"] == [{"currency": "EUR", "debit": 1200 + 600 + 350, "credit": 1200 + 600 + 350}]


# --- The consumers on the real broker ------------------------------------------------------------


def _dead_letter_errors(topic: str, expected: int) -> list[str]:
    return [dict(record.headers)["dlq.error"].decode() for record in read_topic(f"{topic}.DLQ", expected=expected, timeout=30)]


@pytest.mark.django_db(databases="__all__", transaction=True)
class TestConsumers:
    @pytest.fixture
    def consume(self, run_consumer):
        return lambda name, topic: run_consumer(consumer_spec(name, topic, max_retries=1))

    def test_the_fixtures_are_valid_under_the_producers_contracts(self):
        contracts.check(topics.PAYMENT_REFUNDED.name, json.dumps(refunded(1, 2, refund_id=3, amount=600, tax_amount=100)))
        contracts.check(topics.PAYMENT_REFUNDED.name, json.dumps(refunded(1, None, refund_id=3, amount=600, transaction_tax=None)))
        contracts.check(topics.INVENTORY_RETURNED.name, json.dumps(returned(1, refund_id=3)))

    def test_a_refund_posts_one_refund_voucher_even_when_delivered_again(self, make_topic, raw_producer, consume, log_lines):
        chart = _sale_and_refund_books()
        merchant = chart["CASH"].merchant_id
        topic = make_topic(partitions=1)
        value = refunded(merchant, chart["CASH"].id, refund_id=7391000000000001, amount=600, tax_amount=100)
        produce(raw_producer, topic, [value], headers={"messageId": unique("refund")})
        produce(raw_producer, topic, [value], headers={"messageId": unique("refund")})  # re-published: a new message id
        produce(raw_producer, topic, [refunded(merchant, None, refund_id=7391000000000002, amount=100)])
        consume(REFUND_CONSUMER, topic)
        wait_for(lambda: ProcessedMessage.objects.filter(consumer=REFUND_CONSUMER).count() == 3, message="3 messages")
        consume(REFUND_CONSUMER, topic)  # a fresh group: every message again
        wait_for(lambda: log_lines.matching("consumer.replay_skipped"), message="replays")
        assert log_lines.matching("finance.refund.skipped", "no financeAccountId", "7391000000000002")
        (voucher,) = Voucher.objects.filter(merchant_id=merchant, kind="REFUND")
        assert (voucher.source_id, str(voucher.date)) == ("7391000000000001", "2026-11-27")
        assert _lines(voucher) == {("SALES", "EUR", 500, 0), ("TAX_PAYABLE", "EUR", 100, 0), ("CASH", "EUR", 0, 600)}
        assert Account.objects.get(pk=chart["CASH"].pk).balance == 600
        assert log_lines.matching("finance.voucher.idempotent_replay", str(voucher.id))
        assert invariant_violations([merchant]) == []

    def test_refunds_naming_another_merchants_records_are_parked_at_once(self, make_topic, raw_producer, consume):
        mine, theirs = _sale_and_refund_books(), books()
        merchant = mine["CASH"].merchant_id
        foreign_account = refunded(merchant, theirs["CASH"].id, refund_id=11, amount=100)
        disagreeing = refunded(merchant, mine["CASH"].id, refund_id=12, amount=100)
        disagreeing["transaction"]["merchantId"] = str(theirs["CASH"].merchant_id)
        two_accounts = refunded(merchant, mine["CASH"].id, refund_id=13, amount=100)
        two_accounts["transaction"]["financeAccountId"] = str(mine["BANK"].id)
        too_much = refunded(merchant, mine["CASH"].id, refund_id=14, amount=1300)
        topic = make_topic(partitions=1)
        ok = refunded(merchant, mine["CASH"].id, refund_id=15, amount=100)
        produce(raw_producer, topic, [foreign_account, disagreeing, two_accounts, too_much, ok])
        consume(REFUND_CONSUMER, topic)
        wait_for(lambda: Voucher.objects.filter(merchant_id=merchant, kind="REFUND").exists(), message="the good refund")
        errors = _dead_letter_errors(topic, 4)
        assert "another merchant than the refund's" in errors[0]
        assert "different merchants" in errors[1] and "different finance accounts" in errors[2] and "paidAmount" in errors[3]
        assert {dict(record.headers)["dlq.attempts"] for record in read_topic(f"{topic}.DLQ", expected=4)} == {b"1"}
        assert list(Voucher.objects.filter(merchant_id=merchant, kind="REFUND").values_list("source_id", flat=True)) == ["15"]
        assert not Voucher.objects.filter(merchant_id=theirs["CASH"].merchant_id).exists()

    def test_a_refund_in_a_second_currency_posts_to_its_accounts(self, make_topic, raw_producer, consume):
        chart = books()
        merchant = chart["BANK"].merchant_id
        topic = make_topic(partitions=1)
        produce(raw_producer, topic, [refunded(merchant, chart["BANK"].id, refund_id=21, amount=1000, tax_amount=200, currency="USD")])
        consume(REFUND_CONSUMER, topic)
        wait_for(lambda: Voucher.objects.filter(merchant_id=merchant, kind="REFUND").exists(), message="the USD refund")
        usd = {a.system_role: a.balance for a in Account.objects.filter(merchant_id=merchant, currency="USD")}
        assert (usd["BANK"], usd["SALES"], usd["TAX_PAYABLE"]) == (-1000, -800, -200)
        assert invariant_violations([merchant]) == []

    def test_returned_goods_post_one_cogs_return_per_refund(self, make_topic, raw_producer, consume):
        chart = books()
        merchant = chart["COGS"].merchant_id
        topic = make_topic(partitions=1)
        value = returned(merchant, refund_id=31, costs=(300, 400))
        wrong_total = {**returned(merchant, refund_id=32), "totalCostAmount": 1}
        no_cost = returned(merchant, refund_id=33, costs=(0,), currency="")
        produce(raw_producer, topic, [value, wrong_total, no_cost, value], headers={})
        consume(RETURNED_CONSUMER, topic)
        (error,) = _dead_letter_errors(topic, 1)
        assert "totalCostAmount: 1 is not the sum" in error
        (voucher,) = Voucher.objects.filter(merchant_id=merchant)
        assert (voucher.kind, voucher.source_id) == ("COGS_RETURN", "31/EUR")
        assert _lines(voucher) == {("INVENTORY", "EUR", 700, 0), ("COGS", "EUR", 0, 700)}
        assert invariant_violations([merchant]) == []
