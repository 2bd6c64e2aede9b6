"""Issue 20's scenario on the whole platform started as processes (tests/checkout/platform.py),
driven only through public HTTP, the fake provider and a WebSocket client: a merchant (its finance
accounts and inventory location arrive through CDC), a product with a variant and a tax group
(taxation provisions it from the change stream), stock received with a purchase order, a sale order
placed and paid through the fake provider's QR and signed IPN; then every service's state. The same
with the IPN delivered three times, and with the consumer process SIGKILLed while inventory's
consumer holds the payment.success message, ends in the same state; and with a tax group whose VAT
is inclusive, the customer pays the price as shown (the payment, the SALE voucher, whose revenue is
the net and whose tax payable is the VAT inside the price, and the ledger)."""

from __future__ import annotations

import csv
import io
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import requests
from django.conf import settings

from apps.payment.fake_provider import FakeProvider
from apps.signal.client import StreamClient
from tests.checkout.platform import Api, Platform, new_seller, running_platform, wait_for

pytestmark = pytest.mark.slow
PORTS = range(19300, 19350)  # the checkout scenario's ports (the bench's are 19200-19299)
DEADLINE = 45.0  # seconds any asynchronous effect may take
QUANTITY, PRICE, UNIT_COST, RECEIVED = 3, 1000, 600, 10
VAT = "19"
COMMERCE, FINANCE, INVENTORY = "/v1/api/commerce", "/v1/api/finance", "/v1/api/inventory"


@pytest.fixture(scope="module")
def platform():
    with running_platform(ports=PORTS) as started:
        yield started


@pytest.fixture(scope="module")
def seller(platform) -> Api:
    return new_seller(platform)


@dataclass
class Shop:
    merchant_id: str
    cash_account_id: str
    location_id: str
    variant_id: str
    item_id: str
    inclusive: bool
    currency: str  # the variant's, its purchase order's and the order's (the merchant keeps its books in EUR)


def results(api: Api, path: str, **params) -> list[dict]:
    return api.get(path, **params)["results"]


def open_shop(
    platform: Platform, api: Api, provider: FakeProvider, *, received: int = RECEIVED, inclusive: bool = False, currency: str = "EUR"
) -> Shop:
    slug = f"shop-{secrets.token_hex(4)}"
    merchant = api.post(f"{COMMERCE}/merchants", {"name": slug, "slug": slug, "defaultCurrency": "EUR", "country": "DE"})
    merchant_id = merchant["id"]
    # The MERCHANT change stream: finance's chart of accounts and inventory's default location.
    cash = wait_for(
        lambda: results(api, f"{FINANCE}/accounts", merchantId=merchant_id, systemRole="CASH"),
        timeout=DEADLINE,
        message="finance's accounts of the new merchant",
    )[0]
    location = wait_for(
        lambda: results(api, f"{INVENTORY}/locations", merchantId=merchant_id, isDefault="true"),
        timeout=DEADLINE,
        message="inventory's default location",
    )[0]
    group = api.post(
        "/v1/api/taxation/tax-groups",
        {"merchantId": merchant_id, "name": "Standard", "items": [{"name": "VAT", "rate": VAT, "inclusive": inclusive}]},
    )
    product = api.post(f"{COMMERCE}/products", {"merchantId": merchant_id, "name": "Espresso beans", "taxGroupId": group["id"]})
    variant = api.post(
        f"{COMMERCE}/variants",
        {"primaryProductId": product["id"], "sku": f"BEANS-{secrets.token_hex(3)}", "priceAmount": PRICE, "currency": currency},
    )
    # The PRODUCT stream provisions the tax set; the PRODUCT_VARIANT stream makes the inventory item.
    wait_for(
        lambda: results(api, "/v1/api/taxation/tax-sets", productId=product["id"], status="ACTIVE"),
        timeout=DEADLINE,
        message="taxation's tax set of the product",
    )
    item = wait_for(
        lambda: results(api, f"{INVENTORY}/items", variantId=variant["id"]), timeout=DEADLINE, message="inventory's item of the variant"
    )[0]
    order = api.post(
        f"{INVENTORY}/purchase-orders",
        {
            "merchantId": merchant_id,
            "supplier": "Roastery",
            "currency": currency,
            "locationId": location["id"],
            "lines": [{"inventoryItemId": item["id"], "quantity": received, "unitCostAmount": UNIT_COST}],
        },
    )
    api.post(f"{INVENTORY}/purchase-orders/{order['id']}/order")
    api.post(
        f"{INVENTORY}/purchase-orders/{order['id']}/receive",
        {"receiptId": f"rcpt-{secrets.token_hex(4)}", "lines": [{"inventoryItemId": item["id"], "quantity": received}]},
    )
    assert stock_of(api, item["id"]) == (received, 0, received)
    api.post(
        f"{COMMERCE}/integrations",
        {
            "merchantId": merchant_id,
            "code": "QR",
            "credential": provider.secret,
            "environment": "sandbox",
            "settings": {"endpoint": provider.url},
        },
    )
    return Shop(merchant_id, cash["id"], location["id"], variant["id"], item["id"], inclusive, currency)


def stock_of(api: Api, item_id: str) -> tuple[int, int, int]:
    (row,) = results(api, f"{INVENTORY}/stock", inventoryItemId=item_id)
    return row["quantityOnHand"], row["reserved"], row["available"]


def place_order(api: Api, shop: Shop) -> dict:
    order = api.post(
        f"{COMMERCE}/sale-orders",
        {
            "merchantId": shop.merchant_id,
            "lines": [{"variantId": shop.variant_id, "quantity": QUANTITY}],
            "paymentChannel": "QR",
            "financeAccountId": shop.cash_account_id,
            "customerName": "Ada",
            "currency": shop.currency,
        },
    )
    placed = api.post(f"{COMMERCE}/sale-orders/{order['id']}/actions/place", headers={"Idempotency-Key": f"place-{order['id']}"})
    assert placed["status"] == "PLACED", placed
    if shop.inclusive:  # the VAT is inside the price: 3000 = 2521 net + 479 VAT (3000 x 19 / 119, rounded)
        assert (placed["netAmount"], placed["taxAmount"], placed["grossAmount"]) == (2521, 479, QUANTITY * PRICE)
    else:
        assert placed["grossAmount"] == QUANTITY * PRICE * (100 + int(VAT)) // 100
    assert placed["payment"]["amount"] == placed["grossAmount"]
    assert placed["payment"]["taxAmount"] == placed["taxAmount"]  # finance splits the SALE voucher's credit on it
    assert stock_of(api, shop.item_id) == (RECEIVED, QUANTITY, RECEIVED - QUANTITY)
    return placed


class Listener:
    """A WebSocket client on /stream subscribed to the merchant's commerce room, collecting the
    decrypted messages on a thread."""

    def __init__(self, platform: Platform, api: Api, room: str):
        self.client = StreamClient(platform.stream, api.token, info=settings.APP_ENV_WEBSOCKET_ECDH_INFO, timeout=15)
        self.client.connect()
        assert self.client.subscribe(room)["room"] == room
        self.messages: list[dict] = []
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._collect, daemon=True)
        self.thread.start()

    def _collect(self) -> None:
        while not self.closed.is_set():
            try:
                self.messages.append(self.client.receive_message(timeout=0.5))
            except TimeoutError:
                continue
            except Exception:  # the socket closed: the test reads what arrived
                return

    def named(self, name: str) -> list[dict]:
        return [message for message in self.messages if message.get("name") == name]

    def close(self) -> None:
        self.closed.set()
        self.thread.join(timeout=5)
        self.client.close()


def deliver_ipn(provider: FakeProvider, code: str, times: int) -> None:
    """The customer pays: the provider sends its signed IPN; `times` > 1 sends the same IPN again,
    concurrently, as a provider retrying after lost answers would."""
    provider.pay(code, wait=True)
    payment = provider.payments[code]
    assert payment.ipn_replies[-1] == (200, "00"), payment.ipn_replies
    fields = provider.ipn_fields(payment)
    replies: list = []
    threads = [
        threading.Thread(target=lambda: replies.append(requests.post(payment.ipn_url, json=fields, timeout=30).json()["RspCode"]))
        for _ in range(times - 1)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(code in ("00", "02") for code in replies), replies  # 02: already confirmed


def assert_closed_loop(platform: Platform, api: Api, shop: Shop, order: dict, listener: Listener) -> None:
    order_id, gross, tax = order["id"], order["grossAmount"], order["taxAmount"]
    # commerce: PAID through payment's signed webhook.
    wait_for(lambda: api.get(f"{COMMERCE}/sale-orders/{order_id}")["status"] == "PAID", timeout=DEADLINE, message="the order PAID")
    # inventory: deducted once, the reservation converted (nothing left reserved).
    deducted = wait_for(
        lambda: results(api, f"{INVENTORY}/tracking", referenceType="SALE_ORDER", referenceId=order_id, operation="DEDUCT"),
        timeout=DEADLINE,
        message="inventory's deduction",
    )
    # finance: the SALE voucher (debit the order's cash account) and inventory's COGS voucher.
    sale = wait_for(lambda: results(api, f"{FINANCE}/vouchers", merchantId=shop.merchant_id, kind="SALE"), timeout=DEADLINE, message="SALE")
    cogs = wait_for(lambda: results(api, f"{FINANCE}/vouchers", merchantId=shop.merchant_id, kind="COGS"), timeout=DEADLINE, message="COGS")
    # signal: the encrypted room message, decrypted by the client.
    paid = wait_for(lambda: listener.named("order.paid"), timeout=DEADLINE, message="the order.paid message on /stream")
    platform.check_running()

    # Settled: whatever arrives late (redeliveries, a restarted consumer) changes nothing more.
    assert [(row["delta"], row["reservedDelta"]) for row in deducted] == [(-QUANTITY, -QUANTITY)]
    assert stock_of(api, shop.item_id) == (RECEIVED - QUANTITY, 0, RECEIVED - QUANTITY)
    assert len(results(api, f"{INVENTORY}/tracking", referenceType="SALE_ORDER", referenceId=order_id, operation="DEDUCT")) == 1
    assert len(sale) == 1 and len(cogs) == 1, (sale, cogs)
    sale = [api.get(f"{FINANCE}/vouchers/{voucher['id']}") for voucher in sale]
    cogs = [api.get(f"{FINANCE}/vouchers/{voucher['id']}") for voucher in cogs]
    sale_lines = sale[0]["lines"]
    assert sum(line["debit"] for line in sale_lines) == sum(line["credit"] for line in sale_lines) == gross
    # Revenue is the net and the tax the order carried is owed (inclusive: 2521 + 479 of the 3000 paid).
    accounts = results(api, f"{FINANCE}/accounts", merchantId=shop.merchant_id, pageSize=200)
    roles = {account["id"]: account["systemRole"] for account in accounts}
    # A sale in another currency than the books' is booked in that currency's accounts, which finance
    # opened with the first posting in it (the order named the EUR cash account: its USD twin is used).
    cash = next(a["id"] for a in accounts if a["systemRole"] == "CASH" and a["currency"] == shop.currency)
    assert cash == shop.cash_account_id or shop.currency != "EUR"
    assert {line["accountId"]: line["debit"] for line in sale_lines if line["debit"]} == {cash: gross}
    assert {line["currency"] for line in sale_lines + cogs[0]["lines"]} == {shop.currency}
    credits = {roles[line["accountId"]]: line["credit"] for line in sale_lines if line["credit"]}
    assert credits == {"SALES": gross - tax, "TAX_PAYABLE": tax}, sale_lines
    cogs_lines = cogs[0]["lines"]
    assert sum(line["debit"] for line in cogs_lines) == sum(line["credit"] for line in cogs_lines) == QUANTITY * UNIT_COST
    assert [m["payload"]["orderId"] for m in paid] == [order_id] and paid[0]["payload"]["grossAmount"] == gross
    assert api.get(f"{COMMERCE}/sale-orders/{order_id}")["status"] == "PAID"
    assert_ledger_has_the_sale(api, shop, sale[0], gross)


def assert_ledger_has_the_sale(api: Api, shop: Shop, voucher: dict, gross: int) -> None:
    period = datetime.now(UTC).strftime("%Y-%m")
    job = api.post(
        "/v1/api/ledger/ledgers", {"merchantId": shop.merchant_id, "type": "GENERAL_LEDGER", "format": "CSV", "period": period}, expect=202
    )
    done = wait_for(
        lambda: (
            api.get(f"/v1/api/ledger/ledgers/{job['ledgerId']}")["status"] in ("COMPLETED", "FAILED")
            and api.get(f"/v1/api/ledger/ledgers/{job['ledgerId']}")
        ),
        timeout=DEADLINE,
        message="the general ledger document",
    )
    assert done["status"] == "COMPLETED", done
    text = api.call("GET", f"/v1/api/ledger/ledgers/{job['ledgerId']}/download").content.decode()
    rows = list(csv.reader(io.StringIO(text)))
    header = next(number for number, row in enumerate(rows) if row[:2] == ["Date", "Voucher"])  # after the heading lines
    lines = [dict(zip(rows[header], row, strict=False)) for row in rows[header + 1 :] if voucher["voucherNumber"] in row]
    assert [(line["Kind"], line["Currency"]) for line in lines] == [("SALE", shop.currency)] * len(voucher["lines"]), text
    assert sum(int(line["Debit"] or 0) for line in lines) == sum(int(line["Credit"] or 0) for line in lines) == gross, lines
    assert {line["Account code"]: int(line["Debit"] or 0) for line in lines if int(line["Debit"] or 0)} == {"1000": gross}, lines


def checkout(
    platform: Platform,
    api: Api,
    provider: FakeProvider,
    *,
    ipn_times: int = 1,
    before_paying=None,
    inclusive: bool = False,
    currency: str = "EUR",
) -> None:
    shop = open_shop(platform, api, provider, inclusive=inclusive, currency=currency)
    order = place_order(api, shop)
    listener = Listener(platform, api, f"merchant.{shop.merchant_id}.commerce")
    try:
        if before_paying is not None:
            before_paying(order)
        deliver_ipn(provider, order["payment"]["attempts"][0]["code"], ipn_times)
        assert_closed_loop(platform, api, shop, order, listener)
    finally:
        listener.close()


def test_checkout_closes_the_loop_in_every_service(platform, seller, provider):
    checkout(platform, seller, provider)


def test_an_inclusive_tax_group_charges_the_price_as_shown(platform, seller, provider):
    checkout(platform, seller, provider, inclusive=True)


def test_a_sale_in_a_second_currency_reaches_the_books(platform, seller, provider):
    """A merchant keeping its books in EUR sells in USD: the goods bought in USD, the order placed and
    paid in USD; the SALE and the COGS vouchers land in the merchant's USD accounts (opened by the
    first USD posting, so no message is parked for want of them), and the general ledger lists the
    sale in USD."""
    checkout(platform, seller, provider, currency="USD")


def test_an_ipn_delivered_three_times_settles_once(platform, seller, provider):
    checkout(platform, seller, provider, ipn_times=3)


def test_the_consumer_killed_mid_message_ends_in_the_same_state(platform, seller, provider):
    """The test holds the order's reservation rows locked (a database session of its own, the only
    thing not done over HTTP), so inventory's payment.success handler blocks inside its transaction
    with the message in hand; then the consumer process is SIGKILLed, the lock released and a new
    consumer process started: the message is delivered again and handled once."""

    def hold_and_kill(order: dict) -> None:
        holder = platform.connect()
        holder.execute("SELECT 1 FROM inventory.reservation WHERE order_id = %s FOR UPDATE", [order["placementReference"]])
        blocked = threading.Event()

        def kill_when_blocked() -> None:
            wait_for(lambda: waiting_on_reservation(platform), timeout=DEADLINE, message="inventory's handler blocked mid-message")
            platform.kill_consumers()
            holder.rollback()
            holder.close()
            platform.start_consumers()
            blocked.set()

        killer = threading.Thread(target=kill_when_blocked, daemon=True)
        killer.start()
        platform.killer = (killer, blocked)

    checkout(platform, seller, provider, before_paying=hold_and_kill)
    killer, blocked = platform.killer
    killer.join(timeout=DEADLINE)
    assert blocked.is_set()


def waiting_on_reservation(platform: Platform) -> bool:
    with platform.connect() as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            " AND query ILIKE '%%reservation%%'"
        ).fetchone()
    return row[0] > 0
