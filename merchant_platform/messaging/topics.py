"""The platform's topic catalogue: the topics services share, with their partition counts.

Topics are contracts between services that must not import each other, so their names live here in
the kernel. `manage.py create_topics` (run at migrate time) creates these, every topic a registered
consumer reads, and the dead-letter topic `<topic>.DLQ` of each consumed topic.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    base_name: str
    producer: str
    partitions: int = 3

    @property
    def name(self) -> str:
        """The name on the broker: KAFKA_TOPIC_PREFIX (empty by default) and the base name. A prefix
        gives a second platform (a test's scratch one) topics of its own on a shared broker."""
        from django.conf import settings

        return f"{getattr(settings, 'KAFKA_TOPIC_PREFIX', '')}{self.base_name}"

    def __str__(self) -> str:
        return self.name


DEAD_LETTER_SUFFIX = ".DLQ"
DEAD_LETTER_PARTITIONS = 1

PAYMENT_SUCCESS = Topic("payment.success", producer="payment", partitions=6)
# Every payment event (spec 6.1) as emitted, keyed by the transaction id: finance posts from it.
PAYMENT_EVENTS = Topic("payment.events", producer="payment", partitions=6)
# Refunds that succeeded, keyed by the transaction id: inventory restocks, finance posts the REFUND voucher.
PAYMENT_REFUNDED = Topic("payment.refunded", producer="payment", partitions=6)
PURCHASE_ORDER_RECEIVED = Topic("purchase-order.received", producer="inventory")
# Inventory's events for finance (docs/events.md): stock adjustments and cycle counts
# (INVENTORY_ADJUSTMENT vouchers) and the cost of goods sold of deductions on payment (COGS vouchers).
INVENTORY_ADJUSTED = Topic("inventory.stock-adjusted", producer="inventory")
INVENTORY_COGS = Topic("inventory.cogs", producer="inventory")
# The cost of a refund's restocked goods (finance moves it from COGS back to INVENTORY).
INVENTORY_RETURNED = Topic("inventory.returned", producer="inventory")
LEDGER_GENERATE = Topic("ledger.generate", producer="ledger")
SIGNAL_ACTIVITY_NOTIFICATION = Topic("signal.activity-notification", producer="signal")
# Change streams of commerce (spec 6.2), written by the CDC relay (`manage.py cdc`) or by Debezium.
MERCHANT_CHANGES = Topic("cdc.commerce.merchant", producer="commerce")
PRODUCT_CHANGES = Topic("cdc.commerce.product", producer="commerce")
PRODUCT_VARIANT_CHANGES = Topic("cdc.commerce.product_variant", producer="commerce")
# Finance's vouchers as they are posted and voided (voucher.posted, voucher.voided), keyed by the voucher id.
FINANCE_VOUCHERS = Topic("finance.vouchers", producer="finance")

CATALOGUE: tuple[Topic, ...] = (
    PAYMENT_SUCCESS,
    PAYMENT_EVENTS,
    PAYMENT_REFUNDED,
    PURCHASE_ORDER_RECEIVED,
    INVENTORY_ADJUSTED,
    INVENTORY_COGS,
    INVENTORY_RETURNED,
    LEDGER_GENERATE,
    SIGNAL_ACTIVITY_NOTIFICATION,
    MERCHANT_CHANGES,
    PRODUCT_CHANGES,
    PRODUCT_VARIANT_CHANGES,
    FINANCE_VOUCHERS,
)

# The spec's stream names (inventory's MERCHANT and PRODUCT_VARIANT, taxation's product stream).
CHANGE_STREAMS: dict[str, Topic] = {
    "MERCHANT": MERCHANT_CHANGES,
    "PRODUCT": PRODUCT_CHANGES,
    "PRODUCT_VARIANT": PRODUCT_VARIANT_CHANGES,
}


def dead_letter_topic(topic: str) -> str:
    return f"{topic}{DEAD_LETTER_SUFFIX}"
