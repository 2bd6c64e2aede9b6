"""The money path's limits, one set for every service (docs/services/*.md state them per service).

Amounts are integer minor units in PostgreSQL bigint columns. Every amount a request, an event or a
computation produces is checked against these limits before it is stored, so an overflow is a 4xx
with a stable code and never a database error; CHECK constraints hold the same limits in the tables.

- MAX_AMOUNT: one amount (a price, a payment, a voucher line), one line's total, one order's total.
  10^15 minor units (10 trillion of a two-decimal currency) is far above any real sale, and every
  sum of a few thousand of them stays inside JavaScript's exact integers (2^53) and far inside bigint.
- MAX_BALANCE: an account's running balance (finance), a cumulative total. 2^53 - 1, so a balance
  read by a JavaScript client is exact; a posting that would pass it is refused (409).
- MAX_QUANTITY: units on one line, and stock on hand of one item at one location.
"""

from __future__ import annotations

MAX_AMOUNT = 10**15
MAX_BALANCE = 2**53 - 1
MAX_QUANTITY = 10**9

# Stable error codes (RFC 9457 `code`) for the limits.
AMOUNT_TOO_LARGE = "AMOUNT_TOO_LARGE"  # 400: one amount, line total or order total over MAX_AMOUNT
BALANCE_LIMIT_EXCEEDED = "BALANCE_LIMIT_EXCEEDED"  # 409: the posting would take a balance past MAX_BALANCE


def within_amount(value: int) -> bool:
    """Whether a signed amount of minor units is within MAX_AMOUNT (bools are not amounts)."""
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_AMOUNT <= value <= MAX_AMOUNT
