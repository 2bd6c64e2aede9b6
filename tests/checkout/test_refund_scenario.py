"""Refunds (issue 33) on the whole platform started as processes (the checkout scenario's fixtures,
tests/checkout/test_scenario.py), driven only through public HTTP, the fake provider and a WebSocket
client. A merchant sells two lines, the customer pays, then the seller refunds part of one line with
its goods back on the shelf and part of the other without (commerce's refund action, twice): payment's
refunds SUCCEEDED and the transaction PARTIALLY_REFUNDED, commerce's order and its return records,
inventory's stock back for the restocked line only (a RETURN tracking row), finance's REFUND vouchers
and the cost moved from COGS back to INVENTORY, the books balanced, the general ledger listing the
refunds, and the /stream messages. Then twenty concurrent refunds of one order, more than it paid:
exactly those that fit succeed, the others are refused with one stable code, nothing is refunded
twice. And a refund the provider declines: FAILED everywhere, nothing restocked or posted, its units
free to be refunded again."""

from __future__ import annotations

import csv
import io
import secrets
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction

import pytest
import requests

from apps.payment.fake_provider import FakeProvider
from tests.checkout.platform import Api, Platform, new_seller, running_platform, wait_for
from tests.checkout.test_scenario import (
    COMMERCE,
    DEADLINE,
    FINANCE,
    INVENTORY,
    RECEIVED,
    UNIT_COST,
    Listener,
    Shop,
    deliver_ipn,
    open_shop,
    results,
    stock_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the first test starts the platform
PORTS = range(19550, 19600)  # this module's platform (the checkout scenario has 19300-19349, the fuzzing 19500-19549)
PAYMENT = "/v1/api/payment"
SECOND_PRICE, SECOND_UNIT_COST = 450, 200  # the second variant's price and cost (a tax that rounds half way)
REFUND_KIND, RETURNED_COST_KIND = "REFUND", "COGS_RETURN"  # finance's voucher kinds of a refund


@pytest.fixture(scope="module")
def platform():
    with running_platform(ports=PORTS) as started:
        yield started


@pytest.fixture(scope="module")
def seller(platform) -> Api:
    return new_seller(platform)


@dataclass
class TwoVariantShop:
    shop: Shop  # the first variant: PRICE, UNIT_COST, RECEIVED on hand
    second_variant_id: str
    second_item_id: str


def open_two_variant_shop(platform: Platform, api: Api, provider: FakeProvider) -> TwoVariantShop:
    """The checkout scenario's shop, with a second variant of the same product received at its own cost."""
    shop = open_shop(platform, api, provider)
    product_id = api.get(f"{COMMERCE}/variants/{shop.variant_id}")["primaryProductId"]
    variant = api.post(
        f"{COMMERCE}/variants",
        {"primaryProductId": product_id, "sku": f"MUG-{secrets.token_hex(3)}", "priceAmount": SECOND_PRICE, "currency": shop.currency},
    )
    item = wait_for(
        lambda: results(api, f"{INVENTORY}/items", variantId=variant["id"]), timeout=DEADLINE, message="the second variant's item"
    )[0]
    receive(api, shop, item["id"], RECEIVED, SECOND_UNIT_COST)
    return TwoVariantShop(shop, variant["id"], item["id"])


def receive(api: Api, shop: Shop, item_id: str, quantity: int, unit_cost: int) -> None:
    order = api.post(
        f"{INVENTORY}/purchase-orders",
        {
            "merchantId": shop.merchant_id,
            "supplier": "Potter",
            "currency": shop.currency,
            "locationId": shop.location_id,
            "lines": [{"inventoryItemId": item_id, "quantity": quantity, "unitCostAmount": unit_cost}],
        },
    )
    api.post(f"{INVENTORY}/purchase-orders/{order['id']}/order")
    api.post(
        f"{INVENTORY}/purchase-orders/{order['id']}/receive",
        {"receiptId": f"rcpt-{secrets.token_hex(4)}", "lines": [{"inventoryItemId": item_id, "quantity": quantity}]},
    )


def place(api: Api, shop: Shop, lines: list[tuple[str, int]]) -> dict:
    """A QR sale order of (variant, quantity) lines, placed: its payment transaction opened at payment."""
    order = api.post(
        f"{COMMERCE}/sale-orders",
        {
            "merchantId": shop.merchant_id,
            "lines": [{"variantId": variant_id, "quantity": quantity} for variant_id, quantity in lines],
            "paymentChannel": "QR",
            "financeAccountId": shop.cash_account_id,
            "customerName": "Ada",
            "currency": shop.currency,
        },
    )
    placed = api.post(f"{COMMERCE}/sale-orders/{order['id']}/actions/place", headers={"Idempotency-Key": f"place-{order['id']}"})
    assert placed["status"] == "PLACED", placed
    return placed


def pay(api: Api, provider: FakeProvider, order: dict) -> dict:
    """The customer pays once; the order is PAID and inventory deducted every line."""
    deliver_ipn(provider, order["payment"]["attempts"][0]["code"], 1)
    wait_for(lambda: order_of(api, order["id"])["status"] == "PAID", timeout=DEADLINE, message="the order PAID")
    wait_for(
        lambda: (
            len(
                results(
                    api, f"{INVENTORY}/tracking", operation="DEDUCT", referenceType="SALE_ORDER", referenceId=order["placementReference"]
                )
            )
            == len(order["lines"])
        ),
        timeout=DEADLINE,
        message="inventory's deductions",
    )
    return order_of(api, order["id"])


def order_of(api: Api, order_id: str) -> dict:
    return api.get(f"{COMMERCE}/sale-orders/{order_id}")


def refund(api: Api, order_id: str, lines: list[dict], *, key: str | None = None, expect=(200, 201)) -> requests.Response:
    """Commerce's refund action; `lines` as the route takes them (lineId, quantity, restock)."""
    return api.call(
        "POST",
        f"{COMMERCE}/sale-orders/{order_id}/actions/refund",
        json={"lines": lines, "reason": "customer returned the goods"},
        headers={"Idempotency-Key": key or f"refund-{secrets.token_hex(8)}"},
        expect=expect,
    )


def refunded_share(line: dict, field: str, before: int, after: int) -> int:
    """The interface's cumulative rounding: round_half_even(line[field] * q / line quantity), after - before."""
    return round(Fraction(line[field] * after, line["quantity"])) - round(Fraction(line[field] * before, line["quantity"]))


def every(api: Api, path: str, **params) -> list[dict]:
    """Every row of a list route, page after page."""
    found: list[dict] = []
    for page in range(1, 1000):
        body = api.get(path, pageSize=200, page=page, **params)
        found += body["results"]
        if not body.get("next"):
            return found
    raise AssertionError(f"{path} has more than 1000 pages")


def payment_refunds(api: Api, transaction_id: str) -> list[dict]:
    return every(api, f"{PAYMENT}/transactions/{transaction_id}/refunds")


def vouchers(api: Api, merchant_id: str, kind: str) -> list[dict]:
    return [api.get(f"{FINANCE}/vouchers/{v['id']}") for v in every(api, f"{FINANCE}/vouchers", merchantId=merchant_id, kind=kind)]


def account_roles(api: Api, merchant_id: str) -> dict[str, str]:
    return {a["id"]: a["systemRole"] for a in every(api, f"{FINANCE}/accounts", merchantId=merchant_id)}


def by_role(voucher: dict, roles: dict[str, str], side: str) -> dict[str, int]:
    sums: Counter = Counter()
    for line in voucher["lines"]:
        if line[side]:
            sums[roles[line["accountId"]]] += line[side]
    return dict(sums)


def assert_books_balanced(api: Api, merchant_id: str) -> None:
    for voucher in (api.get(f"{FINANCE}/vouchers/{v['id']}") for v in every(api, f"{FINANCE}/vouchers", merchantId=merchant_id)):
        assert sum(line["debit"] for line in voucher["lines"]) == sum(line["credit"] for line in voucher["lines"]), voucher
    trial = api.get(f"{FINANCE}/reports/trial-balance", merchantId=merchant_id)
    assert trial["totals"] and all(total["debit"] == total["credit"] for total in trial["totals"]), trial


def general_ledger_rows(api: Api, merchant_id: str) -> list[dict]:
    """The merchant's general ledger of this month as CSV (ledger), its rows as dicts."""
    job = api.post(
        "/v1/api/ledger/ledgers",
        {"merchantId": merchant_id, "type": "GENERAL_LEDGER", "format": "CSV", "period": datetime.now(UTC).strftime("%Y-%m")},
        expect=202,
    )
    done = wait_for(
        lambda: (document := api.get(f"/v1/api/ledger/ledgers/{job['ledgerId']}"))["status"] in ("COMPLETED", "FAILED") and document,
        timeout=DEADLINE,
        message="the general ledger document",
    )
    assert done["status"] == "COMPLETED", done
    text = api.call("GET", f"/v1/api/ledger/ledgers/{job['ledgerId']}/download").content.decode()
    rows = list(csv.reader(io.StringIO(text)))
    header = next(number for number, row in enumerate(rows) if row[:2] == ["Date", "Voucher"])
    return [dict(zip(rows[header], row, strict=False)) for row in rows[header + 1 :]]


def test_a_paid_order_refunded_in_part_reaches_every_service(platform, seller, provider):
    setup = open_two_variant_shop(platform, seller, provider)
    shop, api = setup.shop, seller
    listener = Listener(platform, api, f"merchant.{shop.merchant_id}.commerce")
    payment_room = Listener(platform, api, f"merchant.{shop.merchant_id}.payment")
    try:
        order = pay(api, provider, place(api, shop, [(shop.variant_id, 3), (setup.second_variant_id, 2)]))
        first, second = sorted(order["lines"], key=lambda line: line["variantId"] != shop.variant_id)
        transaction_id = order["paymentTransactionId"]
        wait_for(lambda: len(vouchers(api, shop.merchant_id, "COGS")) == 1, timeout=DEADLINE, message="the sale's COGS voucher")

        # Two of the three first-line units come back on the shelf; one of the two second-line units does not.
        restocked_key = f"refund-{secrets.token_hex(8)}"
        restocked = refund(api, order["id"], [{"lineId": first["lineId"], "quantity": 2, "restock": True}], key=restocked_key).json()
        wait_for(lambda: order_of(api, order["id"])["status"] == "PARTIALLY_REFUNDED", timeout=DEADLINE, message="PARTIALLY_REFUNDED")
        kept = refund(api, order["id"], [{"lineId": second["lineId"], "quantity": 1, "restock": False}]).json()
        # A replay of the first request (same Idempotency-Key) answers the same return and refunds nothing more.
        replay = refund(api, order["id"], [{"lineId": first["lineId"], "quantity": 2, "restock": True}], key=restocked_key).json()
        assert (replay["id"], replay["grossAmount"], replay["lines"]) == (restocked["id"], restocked["grossAmount"], restocked["lines"])

        expected = [
            (refunded_share(first, "grossAmount", 0, 2), refunded_share(first, "taxAmount", 0, 2)),
            (refunded_share(second, "grossAmount", 0, 1), refunded_share(second, "taxAmount", 0, 1)),
        ]
        refunded_total = sum(amount for amount, _tax in expected)

        # payment: two refunds SUCCEEDED, the transaction PARTIALLY_REFUNDED with their sum refunded.
        refunds = wait_for(
            lambda: len(found := [r for r in payment_refunds(api, transaction_id) if r["status"] == "SUCCEEDED"]) == 2 and found,
            timeout=DEADLINE,
            message="both refunds SUCCEEDED at payment",
        )
        refunds.sort(key=lambda r: r["createdAt"])
        assert len(payment_refunds(api, transaction_id)) == 2  # the replay made none
        assert [(r["amount"], r["taxAmount"], r["currency"]) for r in refunds] == [(a, t, shop.currency) for a, t in expected]
        assert [[(line["variantId"], line["quantity"], line["restock"]) for line in r["lines"]] for r in refunds] == [
            [(shop.variant_id, 2, True)],
            [(setup.second_variant_id, 1, False)],
        ]
        transaction = api.get(f"{PAYMENT}/transactions/{transaction_id}")
        assert (transaction["status"], transaction["refundedAmount"]) == ("PARTIALLY_REFUNDED", refunded_total), transaction

        # commerce: the order PARTIALLY_REFUNDED, a return record per refund, SUCCEEDED.
        wait_for(
            lambda: all(r["status"] == "SUCCEEDED" for r in returns_of(api, order["id"])), timeout=DEADLINE, message="returns SUCCEEDED"
        )
        returns = sorted(returns_of(api, order["id"]), key=lambda r: r["createdAt"])
        assert [r["id"] for r in returns] == [restocked["id"], kept["id"]]
        assert [r["paymentRefundId"] for r in returns] == [r["id"] for r in refunds]
        assert [r["grossAmount"] for r in returns] == [amount for amount, _tax in expected]
        assert order_of(api, order["id"])["status"] == "PARTIALLY_REFUNDED"

        # inventory: the first variant's two units back on hand (one RETURN row), the second's not.
        returned = wait_for(
            lambda: results(api, f"{INVENTORY}/tracking", operation="RETURN", referenceType="REFUND", referenceId=refunds[0]["id"]),
            timeout=DEADLINE,
            message="inventory's RETURN row",
        )
        assert [(row["delta"], row["referenceLine"]) for row in returned] == [(2, first["lineId"])], returned
        assert stock_of(api, shop.item_id)[0] == RECEIVED - 3 + 2
        assert stock_of(api, setup.second_item_id)[0] == RECEIVED - 2
        assert results(api, f"{INVENTORY}/tracking", operation="RETURN", referenceType="REFUND", referenceId=refunds[1]["id"]) == []

        # finance: a REFUND voucher per refund (cash credited, revenue and tax payable debited) and the
        # restocked units' cost moved from COGS back to INVENTORY, at the cost the sale took them at.
        roles = account_roles(api, shop.merchant_id)
        refund_vouchers = wait_for(
            lambda: len(found := vouchers(api, shop.merchant_id, REFUND_KIND)) == 2 and found, timeout=DEADLINE, message="REFUND vouchers"
        )
        refund_vouchers.sort(key=lambda v: v["voucherNumber"])
        for voucher, (amount, tax) in zip(refund_vouchers, expected, strict=True):
            assert by_role(voucher, roles, "credit") == {"CASH": amount}, voucher
            assert by_role(voucher, roles, "debit") == {"SALES": amount - tax, "TAX_PAYABLE": tax}, voucher
            assert {line["currency"] for line in voucher["lines"]} == {shop.currency}
        cost_back = wait_for(
            lambda: vouchers(api, shop.merchant_id, RETURNED_COST_KIND), timeout=DEADLINE, message="the returned goods' cost voucher"
        )
        assert len(cost_back) == 1, cost_back
        assert by_role(cost_back[0], roles, "debit") == {"INVENTORY": 2 * UNIT_COST}, cost_back
        assert by_role(cost_back[0], roles, "credit") == {"COGS": 2 * UNIT_COST}, cost_back
        assert_books_balanced(api, shop.merchant_id)
        cash = next(
            a
            for a in results(api, f"{FINANCE}/accounts", merchantId=shop.merchant_id, systemRole="CASH")
            if a["id"] == shop.cash_account_id
        )
        assert cash["balance"] == order["grossAmount"] - refunded_total

        # ledger: the general ledger lists each REFUND voucher's lines.
        rows = general_ledger_rows(api, shop.merchant_id)
        for voucher in refund_vouchers:
            lines = [row for row in rows if row["Voucher"] == voucher["voucherNumber"]]
            assert [row["Kind"] for row in lines] == [REFUND_KIND] * len(voucher["lines"]), rows
            assert sum(int(row["Credit"] or 0) for row in lines) == sum(line["credit"] for line in voucher["lines"])
        assert [row["Kind"] for row in rows if row["Voucher"] == cost_back[0]["voucherNumber"]] == [RETURNED_COST_KIND] * 2, rows

        # signal: the order's refunds in the commerce room, payment's refund events in the payment room.
        refunded_messages = wait_for(
            lambda: len(found := listener.named("order.refunded")) == 2 and found, timeout=DEADLINE, message="order.refunded on /stream"
        )
        assert {m["payload"]["orderId"] for m in refunded_messages} == {order["id"]}
        assert [(m["payload"]["returnId"], m["payload"]["refundedAmount"]) for m in refunded_messages] == [
            (restocked["id"], expected[0][0]),
            (kept["id"], refunded_total),
        ]
        succeeded = wait_for(
            lambda: len(found := payment_room.named("payment.refund.succeeded")) == 2 and found,
            timeout=DEADLINE,
            message="payment.refund.succeeded on /stream",
        )
        assert sorted(m["payload"]["refund"]["id"] for m in succeeded) == sorted(r["id"] for r in refunds)
        partially = wait_for(
            lambda: len(found := payment_room.named("payment.transaction.partially_refunded")) == 2 and found,
            timeout=DEADLINE,
            message="payment.transaction.partially_refunded on /stream",
        )
        assert [m["payload"]["transaction"]["refundedAmount"] for m in partially] == [expected[0][0], refunded_total], partially
        platform.check_running()
    finally:
        listener.close()
        payment_room.close()


def returns_of(api: Api, order_id: str) -> list[dict]:
    return order_of(api, order_id)["returns"]


CONCURRENT = 20


def test_twenty_concurrent_refunds_beyond_what_was_paid_refund_each_unit_once(platform, seller, provider):
    """Twelve units sold and paid; twenty refunds of one unit each at once, all restocked: twelve
    succeed and eight are refused with one status and one stable code; payment refunded the gross
    exactly once, the stock came back twelve units, finance posted twelve refunds summing to the gross."""
    shop = open_shop(platform, seller, provider)
    sold = 12
    receive(seller, shop, shop.item_id, sold, UNIT_COST)  # more than the shop's first receipt
    on_hand = stock_of(seller, shop.item_id)[0]
    order = pay(seller, provider, place(seller, shop, [(shop.variant_id, sold)]))
    (line,) = order["lines"]
    barrier = threading.Barrier(CONCURRENT)
    answers: list[requests.Response] = []

    def one_unit() -> None:
        barrier.wait(timeout=30)
        client = Api(seller.base, seller.token)  # a connection of its own
        answers.append(
            refund(client, order["id"], [{"lineId": line["lineId"], "quantity": 1, "restock": True}], expect=(200, 201, 400, 409))
        )

    threads = [threading.Thread(target=one_unit) for _ in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(answers) == CONCURRENT
    accepted = [answer.json() for answer in answers if answer.status_code in (200, 201)]
    refused = [(answer.status_code, answer.json()["code"]) for answer in answers if answer.status_code in (400, 409)]
    assert (len(accepted), len(refused)) == (sold, CONCURRENT - sold), [answer.text for answer in answers]
    assert len({accepted_return["id"] for accepted_return in accepted}) == sold

    wait_for(lambda: order_of(seller, order["id"])["status"] == "REFUNDED", timeout=DEADLINE, message="the order REFUNDED")
    refunds = payment_refunds(seller, order["paymentTransactionId"])
    assert [r["status"] for r in refunds] == ["SUCCEEDED"] * sold
    # Cumulative rounding: the twelve shares add up to the line's gross and tax exactly.
    assert sum(r["amount"] for r in refunds) == order["grossAmount"]
    assert sum(r["taxAmount"] for r in refunds) == order["taxAmount"]
    transaction = seller.get(f"{PAYMENT}/transactions/{order['paymentTransactionId']}")
    assert (transaction["status"], transaction["refundedAmount"]) == ("REFUNDED", order["grossAmount"])
    wait_for(lambda: stock_of(seller, shop.item_id)[0] == on_hand, timeout=DEADLINE, message="every unit back on hand")
    refund_vouchers = wait_for(
        lambda: len(found := vouchers(seller, shop.merchant_id, REFUND_KIND)) == sold and found, timeout=DEADLINE, message="12 REFUNDs"
    )
    assert sum(sum(line["debit"] for line in v["lines"]) for v in refund_vouchers) == order["grossAmount"]
    for each in refunds:  # one RETURN row per refund, of one unit
        returned = results(seller, f"{INVENTORY}/tracking", operation="RETURN", referenceType="REFUND", referenceId=each["id"])
        assert [row["delta"] for row in returned] == [1], returned
    assert stock_of(seller, shop.item_id)[0] == on_hand  # and not more, after everything settled
    assert_books_balanced(seller, shop.merchant_id)
    platform.check_running()
    # Every refusal of the same request (one unit of a line with none left) answers alike, however far
    # the accepted ones have got (pending at payment, or the order already REFUNDED).
    assert set(refused) == {(409, "REFUND_EXCEEDS_REFUNDABLE")}, refused


def test_a_refund_the_provider_declines_changes_nothing_and_frees_its_units(platform, seller, provider):
    """The provider declines the refund: payment's refund and commerce's return are FAILED, the order
    stays PAID, nothing comes back on hand and nothing is posted; the same unit can then be refunded."""
    shop = open_shop(platform, seller, provider)
    order = pay(seller, provider, place(seller, shop, [(shop.variant_id, 2)]))
    (line,) = order["lines"]
    on_hand = stock_of(seller, shop.item_id)[0]
    provider.refund_mode = "fail"
    try:
        declined = refund(seller, order["id"], [{"lineId": line["lineId"], "quantity": 1, "restock": True}]).json()
    finally:
        provider.refund_mode = "sync"
    assert (declined["status"], bool(declined["failureReason"])) == ("FAILED", True), declined
    (failed,) = payment_refunds(seller, order["paymentTransactionId"])
    assert failed["status"] == "FAILED" and failed["id"] == declined["paymentRefundId"], failed
    transaction = seller.get(f"{PAYMENT}/transactions/{order['paymentTransactionId']}")
    assert (transaction["status"], transaction["refundedAmount"]) == ("SETTLED", 0), transaction
    assert order_of(seller, order["id"])["status"] == "PAID"

    accepted = refund(seller, order["id"], [{"lineId": line["lineId"], "quantity": 1, "restock": True}]).json()
    wait_for(lambda: order_of(seller, order["id"])["status"] == "PARTIALLY_REFUNDED", timeout=DEADLINE, message="PARTIALLY_REFUNDED")
    wait_for(lambda: stock_of(seller, shop.item_id)[0] == on_hand + 1, timeout=DEADLINE, message="the unit back on hand")
    posted = wait_for(lambda: vouchers(seller, shop.merchant_id, REFUND_KIND), timeout=DEADLINE, message="the REFUND voucher")
    assert [v["sourceId"] for v in posted] == [accepted["paymentRefundId"]]  # none for the declined refund
    assert results(seller, f"{INVENTORY}/tracking", operation="RETURN", referenceType="REFUND", referenceId=failed["id"]) == []
    assert stock_of(seller, shop.item_id)[0] == on_hand + 1
    assert seller.get(f"{PAYMENT}/transactions/{order['paymentTransactionId']}")["refundedAmount"] == accepted["grossAmount"]
