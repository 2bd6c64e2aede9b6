"""The event contracts (merchant_platform/messaging/contracts.py): one per catalogue topic, each a
valid draft 2020-12 schema that takes a producer's payload and refuses a broken one; the outbox
refuses a payload that breaks its topic's contract when MESSAGING_VALIDATE_CONTRACTS is on."""

from __future__ import annotations

import copy
import json

import pytest
from django.test import override_settings
from jsonschema import Draft202012Validator

from merchant_platform.messaging import contracts, topics
from merchant_platform.messaging.outbox import _outbox_fields

ROW = {
    "id": 7390172837490688,
    "created_at": "2026-11-25T13:20:27.601234Z",
    "updated_at": "2026-11-25T13:20:27.601234Z",
    "deleted_at": None,
    "created_by": 42,
}
SOURCE = {
    "version": "merchant-platform-cdc-1",
    "connector": "postgresql",
    "name": "commerce",
    "ts_ms": 1795613227601,
    "snapshot": "false",
    "db": "merchant_platform",
    "sequence": '[null,"738592360"]',
    "schema": "allocation",
    "table": "product_variant",
    "txId": 9810,
    "lsn": 738592360,
    "xmin": None,
}


def change(row: dict) -> dict:
    return {"before": None, "after": {**ROW, **row}, "source": SOURCE, "op": "c", "ts_ms": 1795613227650, "transaction": None}


TRANSACTION = {
    "id": "7390173000000000",
    "merchantId": "7390172837421056",
    "sourceType": "ORDER",
    "sourceId": "SO-1042",
    "amount": 2500,
    "paidAmount": 2500,
    "taxAmount": 417,
    "currency": "EUR",
    "financeAccountId": "7390171000000000",
    "lines": [{"lineId": "1", "variantId": "7390172837490688", "quantity": 2}],
    "status": "SETTLED",
    "createdAt": "2026-11-25T13:39:00+00:00",
    "settledAt": "2026-11-25T13:40:00+00:00",
    "cancelledAt": None,
}
ATTEMPT = {
    "id": "7390173000000001",
    "transactionId": "7390173000000000",
    "merchantId": "7390172837421056",
    "sourceType": "ORDER",
    "sourceId": "SO-1042",
    "financeAccountId": "7390171000000000",
    "channel": "QR",
    "code": "PA3F",
    "amount": 2500,
    "currency": "EUR",
    "status": "302_SUCCESS",
    "providerReference": "14012345",
    "bankCode": "NCB",
    "failureReason": "",
    "expiresAt": None,
    "paidAt": "2026-11-25T13:39:58+00:00",
}
REFUND = {
    "id": "7390173000000002",
    "transactionId": "7390173000000000",
    "merchantId": "7390172837421056",
    "sourceType": "ORDER",
    "sourceId": "SO-1042",
    "financeAccountId": "7390171000000000",
    "amount": 1250,
    "taxAmount": 208,
    "currency": "EUR",
    "reason": "damaged in transit",
    "status": "SUCCEEDED",
    "providerReference": "14012399",
    "failureReason": None,
    "requestedBy": None,
    "lines": [{"lineId": "1", "variantId": "7390172837490688", "quantity": 1, "restock": True, "locationId": None}],
    "createdAt": "2026-11-26T09:00:00+00:00",
    "succeededAt": "2026-11-26T09:00:01+00:00",
    "failedAt": None,
}
ENVELOPE = {"event": "attempt.success", "timestamp": "2026-11-25T13:40:00.123456+00:00", "source": "payment"}

# One producer-shaped payload per catalogue topic, and the member a broken one lacks.
SAMPLES: dict[str, tuple[dict, str]] = {
    topics.PAYMENT_SUCCESS.base_name: (
        {
            **ENVELOPE,
            "transaction": TRANSACTION,
            "attempt": ATTEMPT,
            "order": {
                "merchantId": "7390172837421056",
                "transactionId": "7390173000000000",
                "sourceType": "ORDER",
                "lines": TRANSACTION["lines"],
            },
        },
        "order",
    ),
    topics.PAYMENT_EVENTS.base_name: ({**ENVELOPE, "event": "attempt.failed", "attempt": ATTEMPT}, "attempt"),
    topics.PURCHASE_ORDER_RECEIVED.base_name: (
        {
            "purchaseOrderId": "7404",
            "receiptId": "r-1",
            "merchantId": "7390",
            "locationId": "7401",
            "supplier": "Lamps Ltd",
            "currency": "EUR",
            "status": "PARTIALLY_RECEIVED",
            "receivedAt": "2026-11-25T13:05:00.123Z",
            "totalCostAmount": 520,
            "lines": [
                {
                    "itemId": "7400",
                    "variantId": "7390",
                    "sku": "LAMP-1",
                    "quantityReceived": 4,
                    "quantityReceivedTotal": 4,
                    "quantityOrdered": 10,
                    "unitCostAmount": 130,
                    "totalCostAmount": 520,
                    "movingAverageUnitCostAmount": 109,
                }
            ],
        },
        "purchaseOrderId",
    ),
    topics.INVENTORY_ADJUSTED.base_name: (
        {
            "kind": "CYCLE_COUNT",
            "referenceId": "7402",
            "merchantId": "7390",
            "currency": "EUR",
            "reason": "weekly count",
            "totalValueAmount": -900,
            "lines": [
                {
                    "itemId": "7400",
                    "locationId": "7401",
                    "quantityDelta": -3,
                    "unitCostAmount": 300,
                    "valueAmount": -900,
                    "trackingId": "7403",
                }
            ],
        },
        "totalValueAmount",
    ),
    topics.INVENTORY_COGS.base_name: (
        {
            "orderId": "SO-1042",
            "merchantId": "7390172837421056",
            "currency": "EUR",
            "totalCostAmount": 1400,
            "lines": [
                {
                    "lineId": "1",
                    "itemId": "7400",
                    "variantId": "7390",
                    "locationId": "7401",
                    "quantity": 2,
                    "unitCostAmount": 700,
                    "costAmount": 1400,
                }
            ],
        },
        "orderId",
    ),
    topics.PAYMENT_REFUNDED.base_name: (
        {
            **ENVELOPE,
            "event": "refund.succeeded",
            "transaction": {**TRANSACTION, "status": "PARTIALLY_REFUNDED", "refundedAmount": 1250},
            "refund": REFUND,
        },
        "refund",
    ),
    topics.INVENTORY_RETURNED.base_name: (
        {
            "refundId": REFUND["id"],
            "orderId": "SO-1042",
            "merchantId": "7390172837421056",
            "currency": "EUR",
            "totalCostAmount": 700,
            "lines": [
                {
                    "lineId": "1",
                    "itemId": "7400",
                    "variantId": "7390",
                    "locationId": "7401",
                    "quantity": 1,
                    "unitCostAmount": 700,
                    "costAmount": 700,
                    "trackingId": "7405",
                }
            ],
        },
        "refundId",
    ),
    topics.LEDGER_GENERATE.base_name: ({"ledgerId": "7390172837421056"}, "ledgerId"),
    topics.SIGNAL_ACTIVITY_NOTIFICATION.base_name: (
        {"recipientId": "42", "topic": "orders", "title": "New order", "data": {"orderId": "1"}},
        "topic",
    ),
    topics.MERCHANT_CHANGES.base_name: (
        change(
            {
                "name": "Lamps",
                "slug": "lamps",
                "legal_name": "",
                "default_currency": "EUR",
                "country": "FR",
                "timezone": "Europe/Paris",
                "status": "ACTIVE",
            }
        ),
        "op",
    ),
    topics.PRODUCT_CHANGES.base_name: (
        change({"merchant_id": 7390172837421056, "name": "Lamp", "description": "", "status": "PUBLISHED", "tax_group_id": None}),
        "after",
    ),
    topics.PRODUCT_VARIANT_CHANGES.base_name: (
        change(
            {
                "merchant_id": 7390172837421056,
                "primary_product_id": 7390172837462016,
                "sku": "LAMP-1",
                "name": "",
                "price_amount": 1250,
                "currency": "EUR",
                "unit_cost_amount": 700,
                "attributes": '{"colour": "red"}',
                "status": "ACTIVE",
            }
        ),
        "source",
    ),
    topics.FINANCE_VOUCHERS.base_name: (
        {
            "event": "voucher.posted",
            "timestamp": "2026-11-25T13:40:00.123456+00:00",
            "source": "finance",
            "voucher": {
                "id": "7390174000000000",
                "merchantId": "7390172837421056",
                "voucherNumber": "2026-000042",
                "fiscalYear": 2026,
                "kind": "SALE",
                "reason": "",
                "status": "issued",
                "date": "2026-11-25",
                "memo": "Payment attempt 7390173000000001",
                "sourceType": "payment-attempt",
                "sourceId": "7390173000000001",
                "reversesId": None,
                "voidedAt": None,
                "currency": "EUR",
                "totalAmount": 2500,
                "lines": [
                    {
                        "id": "7390174000000001",
                        "lineNumber": 1,
                        "accountId": "7390171000000000",
                        "currency": "EUR",
                        "debitAmount": 2500,
                        "creditAmount": 0,
                    },
                    {
                        "id": "7390174000000002",
                        "lineNumber": 2,
                        "accountId": "7390171000000001",
                        "currency": "EUR",
                        "debitAmount": 0,
                        "creditAmount": 2500,
                    },
                ],
            },
        },
        "voucher",
    ),
}


def test_every_catalogue_topic_has_a_valid_versioned_contract():
    assert sorted(contracts.CONTRACTS) == sorted(topic.base_name for topic in topics.CATALOGUE)
    for contract in contracts.CONTRACTS.values():
        assert contract.version >= 1
        Draft202012Validator.check_schema(contract.document)
        assert contract.document["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("base_name", sorted(SAMPLES))
def test_sample_payload_validates_and_a_broken_one_is_refused(base_name):
    topic_name = contracts.CONTRACTS[base_name].topic.name
    payload, required = SAMPLES[base_name]
    contracts.check(topic_name, json.dumps(payload))

    without = {name: value for name, value in payload.items() if name != required}
    with pytest.raises(contracts.ContractViolation, match=required):
        contracts.check(topic_name, json.dumps(without))


def test_closed_payloads_refuse_an_unknown_member_and_change_rows_accept_new_columns():
    with pytest.raises(contracts.ContractViolation, match="surprise"):
        contracts.check(topics.INVENTORY_COGS.name, json.dumps({**SAMPLES[topics.INVENTORY_COGS.base_name][0], "surprise": 1}))

    event = copy.deepcopy(SAMPLES[topics.PRODUCT_CHANGES.base_name][0])
    event["after"]["new_column"] = "x"
    contracts.check(topics.PRODUCT_CHANGES.name, json.dumps(event))


def test_a_wrong_type_is_refused_with_its_path():
    payload = copy.deepcopy(SAMPLES[topics.PAYMENT_SUCCESS.base_name][0])
    payload["attempt"]["amount"] = "2500"
    with pytest.raises(contracts.ContractViolation, match=r"\$\.attempt\.amount"):
        contracts.check(topics.PAYMENT_SUCCESS.name, json.dumps(payload))


@pytest.mark.parametrize("topic", [topics.INVENTORY_ADJUSTED, topics.INVENTORY_COGS])
def test_inventory_events_of_items_without_any_currency_carry_an_empty_one(topic):
    """Items may have a blank currency (no cost and no sale currency): their events say "", and
    nothing else but an ISO 4217 code."""
    payload = copy.deepcopy(SAMPLES[topic.base_name][0])
    contracts.check(topic.name, json.dumps({**payload, "currency": ""}))
    with pytest.raises(contracts.ContractViolation, match=r"\$\.currency"):
        contracts.check(topic.name, json.dumps({**payload, "currency": "eur"}))


@pytest.mark.parametrize("event", contracts.REFUND_EVENT_TYPES)
def test_refund_events_carry_the_refund_and_its_transaction_and_no_attempt(event):
    payload = {**ENVELOPE, "event": event, "transaction": {**TRANSACTION, "refundedAmount": 1250}, "refund": REFUND}
    contracts.check(topics.PAYMENT_EVENTS.name, json.dumps(payload))
    with pytest.raises(contracts.ContractViolation):
        contracts.check(topics.PAYMENT_EVENTS.name, json.dumps({**payload, "attempt": ATTEMPT}))
    with pytest.raises(contracts.ContractViolation, match="refund"):
        contracts.check(topics.PAYMENT_EVENTS.name, json.dumps({name: value for name, value in payload.items() if name != "refund"}))


def test_a_topic_outside_the_catalogue_has_no_contract():
    assert contracts.contract_for("scratch.topic") is None
    contracts.check("scratch.topic", json.dumps({"anything": True}))


@override_settings(MESSAGING_VALIDATE_CONTRACTS=True)
def test_the_outbox_refuses_a_payload_that_breaks_its_contract():
    with pytest.raises(contracts.ContractViolation, match="ledgerId"):
        _outbox_fields(topics.LEDGER_GENERATE.name, "1", {"ledger": "1"}, event_type="ledger.generate", source="ledger", headers=None)
    fields = _outbox_fields(
        topics.LEDGER_GENERATE.name, "1", {"ledgerId": "1"}, event_type="ledger.generate", source="ledger", headers=None
    )
    assert json.loads(fields["value"]) == {"ledgerId": "1"}


@override_settings(MESSAGING_VALIDATE_CONTRACTS=False)
def test_without_the_setting_the_outbox_does_not_check():
    fields = _outbox_fields(topics.LEDGER_GENERATE.name, "1", {"ledger": "1"}, event_type="ledger.generate", source="ledger", headers=None)
    assert json.loads(fields["value"]) == {"ledger": "1"}


def test_a_voided_voucher_says_when_and_a_voucher_in_several_currencies_has_no_single_total():
    topic = topics.FINANCE_VOUCHERS.name
    posted = SAMPLES[topics.FINANCE_VOUCHERS.base_name][0]
    voided = copy.deepcopy(posted) | {"event": "voucher.voided"}
    voided["voucher"] |= {"status": "voided", "voidedAt": "2026-11-26T09:00:00+00:00"}
    contracts.check(topic, json.dumps(voided))
    voided["voucher"]["voidedAt"] = None
    with pytest.raises(contracts.ContractViolation, match=r"\$\.voucher\.voidedAt"):
        contracts.check(topic, json.dumps(voided))
    with pytest.raises(contracts.ContractViolation, match=r"\$\.voucher\.status"):
        contracts.check(topic, json.dumps({**posted, "voucher": {**posted["voucher"], "status": "voided"}}))

    several = copy.deepcopy(posted)
    several["voucher"] |= {"currency": None, "totalAmount": None}
    contracts.check(topic, json.dumps(several))
    several["voucher"]["lines"][0]["debitAmount"] = "2500"
    with pytest.raises(contracts.ContractViolation, match=r"\$\.voucher\.lines\[0\]\.debitAmount"):
        contracts.check(topic, json.dumps(several))
