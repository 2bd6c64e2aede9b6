"""What every write of payment shares: the database alias, the transaction row locked first (then
its attempts), the state moves of apps/payment/states.py and the 409s that refuse them."""

from __future__ import annotations

from apps.payment.models import PaymentAttempt, PaymentTransaction
from apps.payment.states import next_attempt_status
from merchant_platform.errors import ApiError, Conflict, NotFound
from merchant_platform.money import AMOUNT_TOO_LARGE, MAX_AMOUNT

DB = "payment"
A = PaymentAttempt.Status
T = PaymentTransaction.Status


def transition_conflict(entity: str, status: str, action: str) -> Conflict:
    """409 for an `action` the state machine of `entity` (transaction, attempt, refund) refuses in `status`."""
    return Conflict(
        f"A {status} {entity} cannot {action}.",
        code=f"{entity.upper()}_INVALID_TRANSITION",
        extra={f"{entity}Status": status, "action": action},
    )


def transaction_conflict(txn: PaymentTransaction, action: str) -> Conflict:
    return transition_conflict("transaction", txn.status, action)


def attempt_conflict(attempt: PaymentAttempt, action: str) -> Conflict:
    return transition_conflict("attempt", attempt.status, action)


def locked_transaction(transaction_id: int) -> PaymentTransaction:
    try:
        return PaymentTransaction.objects.using(DB).select_for_update().get(pk=transaction_id)
    except PaymentTransaction.DoesNotExist:
        raise NotFound("No payment transaction has this id.") from None


def move_attempt(attempt: PaymentAttempt, action: str, **fields) -> None:
    target = next_attempt_status(action, attempt.status)
    if target is None:
        raise attempt_conflict(attempt, action)
    attempt.status = target
    for name, value in fields.items():
        setattr(attempt, name, value)
    attempt.save(using=DB, update_fields=["status", *fields, "updated_at"])


def check_amount(amount: int) -> None:
    if amount > MAX_AMOUNT:
        raise ApiError(
            f"amount is over the largest amount the platform takes ({MAX_AMOUNT} minor units).",
            code=AMOUNT_TOO_LARGE,
            status_code=400,
            extra={"field": "amount", "maxAmount": MAX_AMOUNT},
        )
