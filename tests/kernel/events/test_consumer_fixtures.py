"""The payloads consumers' tests build match the producers' contracts
(merchant_platform/messaging/contracts.py), so a consumer is tested on what its producer really
emits: inventory (payment.success, payment.refunded, MERCHANT and PRODUCT_VARIANT streams) and taxation
(PRODUCT stream)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from merchant_platform.messaging import contracts, topics
from tests.finance import test_refunds as finance_refunds
from tests.inventory import test_streams as inventory_streams
from tests.inventory.test_payment_success import paid
from tests.inventory.test_refunds import line as refund_line
from tests.inventory.test_refunds import refunded
from tests.taxation.test_product_stream import change as product_change

LAMP, DESK = SimpleNamespace(variant_id=7390172837490688), SimpleNamespace(variant_id=7390172837490999)

FIXTURES = {
    "inventory payment.success": (topics.PAYMENT_SUCCESS, lambda: paid("SO-1042", 7390172837421056, (LAMP, 2), (DESK, 1))),
    "inventory payment.refunded": (
        topics.PAYMENT_REFUNDED,
        lambda: refunded(
            "SO-1042", 7390172837421056, refund_line("1", LAMP, 1), refund_line("2", DESK, 1, restock=False, location=7390172837421999)
        ),
    ),
    "inventory merchant insert": (
        topics.MERCHANT_CHANGES,
        lambda: inventory_streams.change("merchant", "c", inventory_streams.merchant_row(7390172837421056), lsn=10),
    ),
    "inventory merchant soft delete": (
        topics.MERCHANT_CHANGES,
        lambda: inventory_streams.change(
            "merchant", "u", inventory_streams.merchant_row(7390172837421056, deleted_at="2026-11-25T14:00:00Z"), lsn=11
        ),
    ),
    "inventory variant insert": (
        topics.PRODUCT_VARIANT_CHANGES,
        lambda: inventory_streams.change("product_variant", "c", inventory_streams.variant_row(7390172837490688, 7390172837421056), lsn=12),
    ),
    "inventory variant hard delete": (
        topics.PRODUCT_VARIANT_CHANGES,
        lambda: inventory_streams.change(
            "product_variant", "d", None, before=inventory_streams.variant_row(7390172837490688, 7390172837421056), lsn=13
        ),
    ),
    "finance payment.refunded": (
        topics.PAYMENT_REFUNDED,
        lambda: finance_refunds.refunded(7390172837421056, 7390172837430001, refund_id=7391000000000001, amount=600, tax_amount=100),
    ),
    "finance payment.refunded without finance account": (
        topics.PAYMENT_REFUNDED,
        lambda: finance_refunds.refunded(7390172837421056, None, refund_id=7391000000000002, amount=1200, transaction_tax=None),
    ),
    "finance inventory.returned": (
        topics.INVENTORY_RETURNED,
        lambda: finance_refunds.returned(7390172837421056, refund_id=7391000000000001),
    ),
    "taxation product insert": (topics.PRODUCT_CHANGES, lambda: product_change("c", 7390172837462016, tax_group_id=5)),
    "taxation product soft delete": (topics.PRODUCT_CHANGES, lambda: product_change("u", 7390172837462016, tax_group_id=5, deleted=True)),
    "taxation product hard delete": (topics.PRODUCT_CHANGES, lambda: product_change("d", 7390172837462016, tax_group_id=None)),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_consumer_fixture_matches_its_topics_contract(name):
    topic, build = FIXTURES[name]
    contracts.check(topic.name, json.dumps(build()))
