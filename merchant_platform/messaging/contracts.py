"""Versioned event contracts: the JSON Schema (draft 2020-12) of every catalogue topic's value.

Written from what each producer emits (the value as it is on the wire: Django's JSON encoder turns
datetimes into ISO-8601 strings). Payloads the platform builds itself are closed
(`additionalProperties: false`): adding a member is a new contract version. What another party
writes (the sale side's order lines, commerce's row columns, a signal message's `data`) stays open,
as docs/events.md promises its consumers. For the change streams (cdc.commerce.*) the contract is
the consumer-facing view: Debezium's envelope and the row columns consumers read.

With MESSAGING_VALIDATE_CONTRACTS (on in the test settings, off by default) the outbox checks every
payload against its topic's contract before storing it (`check`), so every test that emits an event
tests its producer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from merchant_platform.messaging import topics

ID = {"type": "string", "pattern": "^[0-9]+$"}
OPTIONAL_ID = {"type": ["string", "null"], "pattern": "^[0-9]+$"}
AMOUNT = {"type": "integer"}
OPTIONAL_AMOUNT = {"type": ["integer", "null"]}
CURRENCY = {"type": "string", "pattern": "^[A-Z]{3}$"}
# Inventory's events name the items' cost currency, else their sale currency; an item with neither
# (a blank currency is allowed on items) gives "", and its lines then carry no value.
ITEM_CURRENCY = {"type": "string", "pattern": "^(?:[A-Z]{3})?$"}
TIMESTAMP = {"type": "string", "minLength": 1}
OPTIONAL_TIMESTAMP = {"type": ["string", "null"]}
TEXT = {"type": "string"}


def closed(properties: dict, *, optional: tuple[str, ...] = ()) -> dict:
    """An object with exactly these members, all required but `optional`."""
    return {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
        "additionalProperties": False,
    }


# The sale side's order lines, as payment stores and repeats them (docs/events.md, Payment events).
ORDER_LINE = {
    "type": "object",
    "properties": {
        "lineId": TEXT,
        "variantId": {"type": ["string", "integer"]},
        "quantity": {"type": "integer", "minimum": 1},
        "locationId": {"type": ["string", "integer", "null"]},
    },
    "required": ["variantId", "quantity"],
}
ORDER_LINES = {"type": "array", "items": ORDER_LINE}

PAYMENT_TRANSACTION = closed(
    {
        "id": ID,
        "merchantId": ID,
        "sourceType": {"enum": ["ORDER", "MANUAL"]},
        "sourceId": TEXT,
        "amount": AMOUNT,
        "paidAmount": AMOUNT,
        "taxAmount": OPTIONAL_AMOUNT,
        "currency": CURRENCY,
        "financeAccountId": OPTIONAL_ID,
        "lines": {"type": ["array", "null"], "items": ORDER_LINE},
        "status": TEXT,
        "createdAt": OPTIONAL_TIMESTAMP,
        "settledAt": OPTIONAL_TIMESTAMP,
        "cancelledAt": OPTIONAL_TIMESTAMP,
        "refundedAmount": AMOUNT,
    },
    optional=("refundedAmount",),
)
PAYMENT_ATTEMPT = closed(
    {
        "id": ID,
        "transactionId": ID,
        "merchantId": ID,
        "sourceType": {"enum": ["ORDER", "MANUAL"]},
        "sourceId": TEXT,
        "financeAccountId": OPTIONAL_ID,
        "channel": TEXT,
        "code": TEXT,
        "amount": AMOUNT,
        "currency": CURRENCY,
        "status": TEXT,
        "providerReference": {"type": ["string", "null"]},
        "bankCode": {"type": ["string", "null"]},
        "failureReason": {"type": ["string", "null"]},
        "expiresAt": OPTIONAL_TIMESTAMP,
        "paidAt": OPTIONAL_TIMESTAMP,
    }
)
PAYMENT_EVENT_TYPES = [
    "transaction.created",
    "transaction.settled",
    "transaction.cancelled",
    "attempt.created",
    "attempt.sent",
    "attempt.success",
    "attempt.failed",
    "attempt.expired",
    "attempt.cancelled",
    "refund.created",
    "refund.succeeded",
    "refund.failed",
    "transaction.refunded",
    "transaction.partially_refunded",
]
REFUND_EVENT_TYPES = ["refund.created", "refund.succeeded", "refund.failed", "transaction.refunded", "transaction.partially_refunded"]
# A refunded line of a sale (the sale side's lineId and variant), and whether its goods come back on hand.
REFUND_LINE = closed(
    {
        "lineId": TEXT,
        "variantId": ID,
        "quantity": {"type": "integer", "minimum": 1},
        "restock": {"type": "boolean"},
        "locationId": OPTIONAL_ID,
    }
)
PAYMENT_REFUND = closed(
    {
        "id": ID,
        "transactionId": ID,
        "merchantId": ID,
        "sourceType": {"enum": ["ORDER", "MANUAL"]},
        "sourceId": TEXT,
        "financeAccountId": OPTIONAL_ID,
        "amount": {"type": "integer", "minimum": 1},
        "taxAmount": {"type": "integer", "minimum": 0},
        "currency": CURRENCY,
        "reason": TEXT,
        "status": {"enum": ["PENDING", "SUCCEEDED", "FAILED"]},
        "providerReference": {"type": ["string", "null"]},
        "failureReason": {"type": ["string", "null"]},
        "requestedBy": OPTIONAL_ID,
        "lines": {"type": "array", "maxItems": 500, "items": REFUND_LINE},
        "createdAt": OPTIONAL_TIMESTAMP,
        "succeededAt": OPTIONAL_TIMESTAMP,
        "failedAt": OPTIONAL_TIMESTAMP,
    }
)
PAYMENT_ENVELOPE = {"event": {"enum": PAYMENT_EVENT_TYPES}, "timestamp": TIMESTAMP, "source": {"const": "payment"}}

PAYMENT_EVENT = closed(
    {**PAYMENT_ENVELOPE, "transaction": PAYMENT_TRANSACTION, "attempt": PAYMENT_ATTEMPT, "refund": PAYMENT_REFUND},
    optional=("transaction", "attempt", "refund"),
) | {
    # spec 2.5: attempt.failed/expired/cancelled carry the attempt only, transaction.cancelled the
    # transaction only, every other event both.
    "allOf": [
        {
            "if": {"properties": {"event": {"enum": ["attempt.failed", "attempt.expired", "attempt.cancelled"]}}},
            "then": {"required": ["attempt"], "not": {"required": ["transaction"]}},
        },
        {
            "if": {"properties": {"event": {"const": "transaction.cancelled"}}},
            "then": {"required": ["transaction"], "not": {"required": ["attempt"]}},
        },
        {
            "if": {
                "properties": {
                    "event": {"enum": ["transaction.created", "transaction.settled", "attempt.created", "attempt.sent", "attempt.success"]}
                }
            },
            "then": {"required": ["transaction", "attempt"]},
        },
        {
            # a refund's events carry the refund and its transaction (its refundedAmount as it stands after)
            "if": {"properties": {"event": {"enum": REFUND_EVENT_TYPES}}},
            "then": {"required": ["transaction", "refund"], "not": {"required": ["attempt"]}},
        },
    ],
}

# A refund that succeeded, for inventory (restocked lines) and finance (the REFUND voucher): keyed by
# the transaction id, so a transaction's refunds arrive in order. `refund.sourceId` is the sale's
# reference, as in the transaction's payment.success (inventory's deduction orderId).
PAYMENT_REFUNDED = closed(
    {
        **PAYMENT_ENVELOPE,
        "event": {"const": "refund.succeeded"},
        "transaction": PAYMENT_TRANSACTION,
        "refund": PAYMENT_REFUND,
    }
)

PAYMENT_SUCCESS = closed(
    {
        **PAYMENT_ENVELOPE,
        "event": {"const": "attempt.success"},
        "transaction": PAYMENT_TRANSACTION,
        "attempt": PAYMENT_ATTEMPT,
        "order": closed(
            {
                "merchantId": ID,
                "transactionId": ID,
                "sourceType": {"enum": ["ORDER", "MANUAL"]},
                "lines": {"type": ["array", "null"], "items": ORDER_LINE},
            }
        ),
    }
)

PURCHASE_ORDER_RECEIVED = closed(
    {
        "purchaseOrderId": ID,
        "receiptId": TEXT,
        "merchantId": ID,
        "locationId": ID,
        "supplier": TEXT,
        "currency": CURRENCY,
        "status": {"enum": ["PARTIALLY_RECEIVED", "RECEIVED"]},
        "receivedAt": TIMESTAMP,
        "totalCostAmount": AMOUNT,
        "lines": {
            "type": "array",
            "maxItems": 500,
            "items": closed(
                {
                    "itemId": ID,
                    "variantId": ID,
                    "sku": TEXT,
                    "quantityReceived": {"type": "integer"},
                    "quantityReceivedTotal": {"type": "integer"},
                    "quantityOrdered": {"type": "integer"},
                    "unitCostAmount": AMOUNT,
                    "totalCostAmount": AMOUNT,
                    "movingAverageUnitCostAmount": OPTIONAL_AMOUNT,
                }
            ),
        },
    }
)

INVENTORY_ADJUSTED = closed(
    {
        "kind": {"enum": ["ADJUSTMENT", "CYCLE_COUNT"]},
        "referenceId": TEXT,
        "merchantId": ID,
        "currency": ITEM_CURRENCY,
        "reason": TEXT,
        "totalValueAmount": AMOUNT,
        "lines": {
            "type": "array",
            "minItems": 1,
            "items": closed(
                {
                    "itemId": ID,
                    "locationId": ID,
                    "quantityDelta": {"type": "integer"},
                    "unitCostAmount": OPTIONAL_AMOUNT,
                    "valueAmount": AMOUNT,
                    "trackingId": ID,
                }
            ),
        },
    }
)

# A line of goods at the cost inventory held them at (a sale's deduction, or its return).
COST_LINE = {
    "lineId": TEXT,
    "itemId": ID,
    "variantId": ID,
    "locationId": ID,
    "quantity": {"type": "integer", "minimum": 1},
    "unitCostAmount": OPTIONAL_AMOUNT,
    "costAmount": AMOUNT,
}
INVENTORY_COGS = closed(
    {
        "orderId": TEXT,
        "merchantId": ID,
        "currency": ITEM_CURRENCY,
        "totalCostAmount": AMOUNT,
        "lines": {
            "type": "array",
            "minItems": 1,
            "items": closed(COST_LINE),
        },
    }
)

# The cost of a refund's restocked goods, for finance (a voucher moving it from COGS back to
# INVENTORY): one message per refund with restocked lines, keyed by the refund id.
INVENTORY_RETURNED = closed(
    {
        "refundId": ID,
        "orderId": TEXT,
        "merchantId": ID,
        "currency": ITEM_CURRENCY,
        "totalCostAmount": AMOUNT,
        "lines": {
            "type": "array",
            "minItems": 1,
            "items": closed({**COST_LINE, "trackingId": ID}),
        },
    }
)

LEDGER_GENERATE = closed({"ledgerId": ID})

# Written by other services (apps/signal/serializers.py ActivityMessageSerializer is what signal
# accepts): `data` is the sender's own JSON object.
SIGNAL_ACTIVITY_NOTIFICATION = closed(
    {
        "recipientId": {"type": ["string", "integer"]},
        "topic": {"type": "string", "minLength": 1, "maxLength": 200},
        "room": {"type": "string", "maxLength": 200},
        "title": {"type": "string", "maxLength": 200},
        "body": {"type": "string", "maxLength": 5000},
        "data": {"type": "object"},
    },
    optional=("room", "title", "body", "data"),
)

# The change streams: Debezium's envelope (docs/events.md, Change events) around commerce's rows.
# Columns are added, never renamed or retyped, so a row is open; the listed ones are what consumers read.
BIGINT = {"type": "integer"}
OPTIONAL_BIGINT = {"type": ["integer", "null"]}
ROW_COMMON = {
    "id": BIGINT,
    "created_at": TIMESTAMP,
    "updated_at": TIMESTAMP,
    "deleted_at": OPTIONAL_TIMESTAMP,
    "created_by": OPTIONAL_BIGINT,
}


def change_event(columns: dict) -> dict:
    row = {"type": "object", "properties": {**ROW_COMMON, **columns}, "required": [*ROW_COMMON, *columns]}
    return {
        "type": "object",
        "properties": {
            "before": {"oneOf": [{"type": "null"}, row]},
            "after": {"oneOf": [{"type": "null"}, row]},
            "source": {
                "type": "object",
                "properties": {
                    "connector": {"const": "postgresql"},
                    "ts_ms": {"type": "integer"},
                    "snapshot": {"enum": ["true", "false", "last", True, False]},
                    "db": TEXT,
                    "schema": TEXT,
                    "table": TEXT,
                    "lsn": {"type": ["integer", "null"]},
                },
                "required": ["connector", "db", "schema", "table"],
            },
            "op": {"enum": ["c", "u", "d", "r"]},
            "ts_ms": {"type": ["integer", "null"]},
            "transaction": {"type": ["object", "null"]},
        },
        "required": ["before", "after", "source", "op"],
        # a delete carries the row in `before`, every other change in `after`
        "if": {"properties": {"op": {"const": "d"}}},
        "then": {"properties": {"before": row}},
        "else": {"properties": {"after": row}},
    }


MERCHANT_CHANGE = change_event(
    {
        "name": TEXT,
        "slug": TEXT,
        "legal_name": TEXT,
        "default_currency": CURRENCY,
        "country": TEXT,
        "timezone": TEXT,
        "status": {"enum": ["ACTIVE", "SUSPENDED"]},
    }
)
PRODUCT_CHANGE = change_event(
    {
        "merchant_id": BIGINT,
        "name": TEXT,
        "description": TEXT,
        "status": {"enum": ["DRAFT", "PUBLISHED", "ARCHIVED"]},
        "tax_group_id": OPTIONAL_BIGINT,
    }
)
PRODUCT_VARIANT_CHANGE = change_event(
    {
        "merchant_id": BIGINT,
        "primary_product_id": BIGINT,
        "sku": TEXT,
        "name": TEXT,
        "price_amount": {"type": "integer", "minimum": 0},
        "currency": CURRENCY,
        "unit_cost_amount": OPTIONAL_BIGINT,
        "attributes": TEXT,
        "status": {"enum": ["ACTIVE", "INACTIVE"]},
    }
)

# Finance's vouchers (docs/services/finance.md, Events): the voucher as it stands after the event, with
# its lines. `currency` and `totalAmount` (the sum of the debits, equal to the credits) are null for a
# voucher whose lines are in several currencies (each balanced by itself).
# A voucher kind (SALE, COGS, REVERSAL...): finance adds kinds as it posts new documents (refunds).
VOUCHER_KIND = {"type": "string", "pattern": "^[A-Z][A-Z_]*$"}
VOUCHER_LINE = closed(
    {
        "id": ID,
        "lineNumber": {"type": "integer", "minimum": 1},
        "accountId": ID,
        "currency": CURRENCY,
        "debitAmount": {"type": "integer", "minimum": 0},
        "creditAmount": {"type": "integer", "minimum": 0},
    }
)
FINANCE_VOUCHER = closed(
    {
        "event": {"enum": ["voucher.posted", "voucher.voided"]},
        "timestamp": TIMESTAMP,
        "source": {"const": "finance"},
        "voucher": closed(
            {
                "id": ID,
                "merchantId": ID,
                "voucherNumber": TEXT,
                "fiscalYear": {"type": "integer"},
                "kind": VOUCHER_KIND,
                "reason": TEXT,
                "status": {"enum": ["issued", "voided"]},
                "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                "memo": TEXT,
                "sourceType": TEXT,
                "sourceId": TEXT,
                "reversesId": OPTIONAL_ID,
                "voidedAt": OPTIONAL_TIMESTAMP,
                "currency": {"type": ["string", "null"], "pattern": "^[A-Z]{3}$"},
                "totalAmount": {"type": ["integer", "null"], "minimum": 0},
                "lines": {"type": "array", "minItems": 2, "maxItems": 500, "items": VOUCHER_LINE},
            }
        ),
    }
) | {
    # a posted voucher is issued; a voided one says when
    "if": {"properties": {"event": {"const": "voucher.voided"}}},
    "then": {"properties": {"voucher": {"properties": {"status": {"const": "voided"}, "voidedAt": TIMESTAMP}}}},
    "else": {"properties": {"voucher": {"properties": {"status": {"const": "issued"}}}}},
}


@dataclass(frozen=True)
class Contract:
    topic: topics.Topic
    version: int
    schema: dict

    @property
    def document(self) -> dict:
        """The JSON Schema document, with its dialect and an id naming the topic and version."""
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:merchant-platform:event:{self.topic.base_name}:v{self.version}",
            **self.schema,
        }


CONTRACTS: dict[str, Contract] = {
    contract.topic.base_name: contract
    for contract in (
        Contract(topics.PAYMENT_SUCCESS, 1, PAYMENT_SUCCESS),
        Contract(topics.PAYMENT_EVENTS, 1, PAYMENT_EVENT),
        Contract(topics.PURCHASE_ORDER_RECEIVED, 1, PURCHASE_ORDER_RECEIVED),
        Contract(topics.INVENTORY_ADJUSTED, 1, INVENTORY_ADJUSTED),
        Contract(topics.INVENTORY_COGS, 1, INVENTORY_COGS),
        Contract(topics.PAYMENT_REFUNDED, 1, PAYMENT_REFUNDED),
        Contract(topics.INVENTORY_RETURNED, 1, INVENTORY_RETURNED),
        Contract(topics.LEDGER_GENERATE, 1, LEDGER_GENERATE),
        Contract(topics.SIGNAL_ACTIVITY_NOTIFICATION, 1, SIGNAL_ACTIVITY_NOTIFICATION),
        Contract(topics.MERCHANT_CHANGES, 1, MERCHANT_CHANGE),
        Contract(topics.PRODUCT_CHANGES, 1, PRODUCT_CHANGE),
        Contract(topics.PRODUCT_VARIANT_CHANGES, 1, PRODUCT_VARIANT_CHANGE),
        Contract(topics.FINANCE_VOUCHERS, 1, FINANCE_VOUCHER),
    )
}


class ContractViolation(ValueError):
    """A payload that does not match its topic's contract: a producer bug."""


@cache
def _validator(base_name: str) -> Draft202012Validator:
    document = CONTRACTS[base_name].document
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


def contract_for(topic_name: str) -> Contract | None:
    """The contract of a topic by its name on the broker (with KAFKA_TOPIC_PREFIX); None when the
    topic is not in the catalogue."""
    for topic in topics.CATALOGUE:
        if topic.name == topic_name:
            return CONTRACTS.get(topic.base_name)
    return None


def check(topic_name: str, value: bytes | str) -> None:
    """Raise ContractViolation when `value` (the encoded JSON) breaks the topic's contract."""
    contract = contract_for(topic_name)
    if contract is None:
        return
    payload = json.loads(value)
    errors = sorted(_validator(contract.topic.base_name).iter_errors(payload), key=lambda error: list(error.absolute_path))
    if errors:
        raise ContractViolation(f"{contract.topic.base_name} v{contract.version}: " + "; ".join(_describe(error) for error in errors[:5]))


def _describe(error: ValidationError) -> str:
    return f"{error.json_path}: {error.message}"
