"""Kafka handlers of the inventory service (spec 6.2), in group SVC-00050-INVENTORY_CONSUMER_GROUP:

- the MERCHANT change stream keeps each live merchant's default location (ensureDefaultLocation);
- the PRODUCT_VARIANT change stream keeps one item per variant;
- `payment.success` deducts the paid order's lines once (docs/events.md has the payload);
- `payment.refunded` puts a refund's lines with restock true back on hand once (RETURN rows).

Idempotent twice over: the runner records each message id with the handler's effect, and every
effect is idempotent by its own key (merchant id, variant id, merchant with order and line). An
event naming a record of another merchant is parked on the DLQ at once, with the reason."""

from __future__ import annotations

from apps.inventory import services
from apps.inventory.serializers import PaymentRefundedSerializer, PaymentSuccessSerializer, paid_orders
from merchant_platform.cdc import InvalidChangeEvent, parse_change_event
from merchant_platform.errors import InvalidInput
from merchant_platform.logging import get_logger
from merchant_platform.messaging import Message, consumer, topics
from merchant_platform.messaging.messages import UndecodableMessage

MERCHANT_CONSUMER = "inventory.merchant"
VARIANT_CONSUMER = "inventory.product-variant"
PAYMENT_CONSUMER = "inventory.payment-success"
REFUND_CONSUMER = "inventory.payment-refunded"
NAMES = (MERCHANT_CONSUMER, VARIANT_CONSUMER, PAYMENT_CONSUMER, REFUND_CONSUMER)
log = get_logger(__name__)


def _change(message: Message):
    try:
        return parse_change_event(message.value)
    except InvalidChangeEvent as exc:
        raise UndecodableMessage(f"not a change event: {exc}") from None


def _gone(event) -> bool:
    return event.op == "d" or event.row.get("deleted_at") is not None


@consumer(MERCHANT_CONSUMER, topics=[topics.MERCHANT_CHANGES])
def merchant_changed(message: Message) -> None:
    event = _change(message)
    if event is None:  # the tombstone after a hard delete
        return
    row = event.row
    if _gone(event):
        log.info("inventory.merchant_gone", merchantId=str(row["id"]))
        return
    services.location_ensure_default(merchant_id=int(row["id"]))


@consumer(VARIANT_CONSUMER, topics=[topics.PRODUCT_VARIANT_CHANGES])
def product_variant_changed(message: Message) -> None:
    event = _change(message)
    if event is None:
        return
    row = event.row
    try:
        services.item_sync(
            variant_id=int(row["id"]),
            merchant_id=int(row["merchant_id"]),
            product_id=row.get("primary_product_id"),
            sku=row["sku"],
            name=row.get("name") or "",
            active=not _gone(event) and row.get("status", "ACTIVE") == "ACTIVE",
            currency=row.get("currency") or "",
            unit_cost_amount=row.get("unit_cost_amount"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UndecodableMessage(f"variant row without {exc}") from None
    except services.ForeignRecord as exc:  # no retry makes another merchant's item this one's
        raise UndecodableMessage(f"variant row names an item of another merchant: {exc.detail}") from None
    except InvalidInput as exc:
        raise UndecodableMessage(f"variant row out of limits: {exc.detail}") from None


@consumer(PAYMENT_CONSUMER, topics=[topics.PAYMENT_SUCCESS], batch=True)
def payment_success(messages: list[Message]) -> None:
    """Deduct the paid orders of one poll together (a batch handler: a fixed number of statements
    per batch). When the batch fails the runner hands each message alone: a value no retry can fix
    is then parked at once, naming the fields; a variant not yet known is retried, then parked."""
    values = [message.value for message in messages]
    orders = paid_orders(values)
    if orders is None:  # something is not plainly well formed: DRF decides and names it
        serializer = PaymentSuccessSerializer(data=values, many=True)  # one field tree for the batch
        if not serializer.is_valid():
            errors = serializer.errors  # {index in the batch: what is wrong}
            detail = dict(errors[0]) if len(messages) == 1 else {messages[n].position: dict(error) for n, error in errors.items()}
            raise UndecodableMessage(f"invalid payment.success: {detail}")
        orders = serializer.validated_data
    try:
        services.stock_deduct_orders(orders=orders)
    except services.ForeignRecord as exc:  # no retry makes another merchant's record this one's
        raise UndecodableMessage(f"payment.success names records of another merchant: {exc.detail}") from None


@consumer(REFUND_CONSUMER, topics=[topics.PAYMENT_REFUNDED], batch=True)
def payment_refunded(messages: list[Message]) -> None:
    """Return the restocked lines of the succeeded refunds of one poll together (a batch handler,
    as payment_success). A malformed value, a location of another merchant or a refund line that
    contradicts its sale line is parked at once, naming what is wrong; a sale line inventory has
    not deducted (yet) is retried, then parked (SALE_LINE_NOT_DEDUCTED)."""
    serializer = PaymentRefundedSerializer(data=[message.value for message in messages], many=True)
    if not serializer.is_valid():
        errors = serializer.errors  # {index in the batch: what is wrong}
        detail = dict(errors[0]) if len(messages) == 1 else {messages[n].position: dict(error) for n, error in errors.items()}
        raise UndecodableMessage(f"invalid payment.refunded: {detail}")
    try:
        services.stock_return_refunds(refunds=serializer.validated_data)
    except services.ForeignRecord as exc:  # no retry makes another merchant's location this one's
        raise UndecodableMessage(f"payment.refunded names records of another merchant: {exc.detail}") from None
    except services.RefundLineMismatch as exc:
        raise UndecodableMessage(f"payment.refunded contradicts the sale it refunds: {exc.detail}") from None
