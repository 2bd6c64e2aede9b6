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

from decimal import Decimal

MAX_AMOUNT = 10**15
MAX_BALANCE = 2**53 - 1
MAX_QUANTITY = 10**9

# Stable error codes (RFC 9457 `code`) for the limits.
AMOUNT_TOO_LARGE = "AMOUNT_TOO_LARGE"  # 400: one amount, line total or order total over MAX_AMOUNT
BALANCE_LIMIT_EXCEEDED = "BALANCE_LIMIT_EXCEEDED"  # 409: the posting would take a balance past MAX_BALANCE


def within_amount(value: int) -> bool:
    """Whether a signed amount of minor units is within MAX_AMOUNT (bools are not amounts)."""
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_AMOUNT <= value <= MAX_AMOUNT


# ISO 4217 active currencies by exponent (the number of decimal digits of one minor unit): what an
# operator's screen needs to show 1100 EUR as 11.00 EUR, 1100 JPY as 1100 JPY and 1100 KWD as 1.100 KWD.
ZERO_DIGITS = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF"
THREE_DIGITS = "BHD IQD JOD KWD LYD OMR TND"
FOUR_DIGITS = "CLF UYW"
MINOR_DIGITS: dict[str, int] = {
    **dict.fromkeys(ZERO_DIGITS.split(), 0),
    **dict.fromkeys(THREE_DIGITS.split(), 3),
    **dict.fromkeys(FOUR_DIGITS.split(), 4),
}
DEFAULT_MINOR_DIGITS = 2  # every other active ISO 4217 currency


def minor_digits(currency: str) -> int:
    """The currency's ISO 4217 exponent."""
    return MINOR_DIGITS.get(currency, DEFAULT_MINOR_DIGITS)


def display(amount: int, currency: str) -> str:
    """`amount` minor units with their currency, exactly: 1100 EUR -> "11.00 EUR", -5 KWD -> "-0.005 KWD"."""
    return f"{Decimal(amount).scaleb(-minor_digits(currency)):f} {currency}"
