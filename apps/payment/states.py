"""The payment state machines (spec 3 names NEW and 302_SUCCESS; the rest is ours, see
docs/services/payment.md).

Transaction:
    create ──> NEW ──successful attempts cover the amount──> SETTLED
                │
                └──cancel (every open attempt cancelled)───> CANCELLED

Attempt:
    create ──> CREATED ──provider accepted──> SENT ──IPN 00──> 302_SUCCESS
                  │  │                        │  │
                  │  └─provider timed out─> UNKNOWN ──provider answers──> SENT / FAILED / 302_SUCCESS
                  │                           │  └─IPN non-00─> FAILED      (UNKNOWN also takes an IPN)
                  ├─provider refused─> FAILED └─expiry passed─> EXPIRED
                  └─cancel (also from SENT)─> CANCELLED

Every action not in these tables answers 409 with code TRANSACTION_INVALID_TRANSITION or
ATTEMPT_INVALID_TRANSITION.
"""

from __future__ import annotations

from apps.payment.models import PaymentAttempt, PaymentTransaction

T = PaymentTransaction.Status
A = PaymentAttempt.Status

TRANSACTION_TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "settle": (frozenset({T.NEW}), T.SETTLED),
    "cancel": (frozenset({T.NEW}), T.CANCELLED),
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
