"""The payment state machines (spec 3 names NEW and 302_SUCCESS; the rest is ours, see
docs/services/payment.md).

Transaction:
    create ──> NEW ──successful attempts cover the amount──> SETTLED ──a refund succeeds──> PARTIALLY_REFUNDED
                │                                              │                              │  ▲
                │                                              │                              └──┘ another refund
                │                                              └──refunds cover paidAmount──> REFUNDED <──┘ (covers it)
                └──cancel (every open attempt cancelled)───> CANCELLED

Refund (of a SETTLED or PARTIALLY_REFUNDED transaction):
    create ──> PENDING ──provider answers success, signed callback 00, resolver hears SUCCEEDED,
                  │      or the cashier confirms a SYSTEM refund──> SUCCEEDED
                  └─provider refuses, callback non-00, resolver hears FAILED or 404, or fail──> FAILED
    A provider that timed out leaves it PENDING: the resolver asks the provider, never guesses.

Attempt:
    create ──> CREATED ──provider accepted──> SENT ──IPN 00──> 302_SUCCESS
                  │  │                        │  │
                  │  └─provider timed out─> UNKNOWN ──provider answers──> SENT / FAILED / 302_SUCCESS
                  │                           │  └─IPN non-00─> FAILED      (UNKNOWN also takes an IPN)
                  ├─provider refused─> FAILED └─expiry passed─> EXPIRED
                  └─cancel (also from SENT)─> CANCELLED

Every action not in these tables answers 409 with code TRANSACTION_INVALID_TRANSITION,
ATTEMPT_INVALID_TRANSITION or REFUND_INVALID_TRANSITION (a refund of a transaction that is not
SETTLED or PARTIALLY_REFUNDED: TRANSACTION_NOT_REFUNDABLE).
"""

from __future__ import annotations

from apps.payment.models import PaymentAttempt, PaymentTransaction, Refund

T = PaymentTransaction.Status
A = PaymentAttempt.Status
R = Refund.Status

# Transactions whose money may be (further) given back.
REFUNDABLE_TRANSACTION_STATES = frozenset({T.SETTLED, T.PARTIALLY_REFUNDED})

TRANSACTION_TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "settle": (frozenset({T.NEW}), T.SETTLED),
    "cancel": (frozenset({T.NEW}), T.CANCELLED),
    "refund_partially": (REFUNDABLE_TRANSACTION_STATES, T.PARTIALLY_REFUNDED),
    "refund_fully": (REFUNDABLE_TRANSACTION_STATES, T.REFUNDED),
}

REFUND_TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "succeed": (frozenset({R.PENDING}), R.SUCCEEDED),
    "fail": (frozenset({R.PENDING}), R.FAILED),
}

ATTEMPT_TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "send": (frozenset({A.CREATED, A.UNKNOWN}), A.SENT),
    "time_out": (frozenset({A.CREATED}), A.UNKNOWN),
    "fail": (frozenset({A.CREATED, A.SENT, A.UNKNOWN}), A.FAILED),
    "succeed": (frozenset({A.CREATED, A.SENT, A.UNKNOWN}), A.SUCCESS),
    "expire": (frozenset({A.SENT}), A.EXPIRED),
    "cancel": (frozenset({A.CREATED, A.SENT}), A.CANCELLED),
}

# Attempts that may still collect money: a transaction cannot be cancelled while one is UNKNOWN
# (the provider may have taken the money), and a new attempt is refused while one is open.
OPEN_ATTEMPT_STATES = frozenset({A.CREATED, A.SENT, A.UNKNOWN})
FINAL_ATTEMPT_STATES = frozenset({A.SUCCESS, A.FAILED, A.EXPIRED, A.CANCELLED})


def next_transaction_status(action: str, current: str) -> str | None:
    sources, target = TRANSACTION_TRANSITIONS[action]
    return target if current in sources else None


def next_attempt_status(action: str, current: str) -> str | None:
    sources, target = ATTEMPT_TRANSITIONS[action]
    return target if current in sources else None


def next_refund_status(action: str, current: str) -> str | None:
    sources, target = REFUND_TRANSITIONS[action]
    return target if current in sources else None
