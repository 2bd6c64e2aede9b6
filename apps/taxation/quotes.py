"""The tax arithmetic of a quote: pure functions over Decimal, no database (docs/services/taxation.md).

Amounts are in minor units of the quote's currency. A line's `amount` is quantity x unit price minus
its discount: what the customer is charged before exclusive taxes. Each line carries the tax items
in effect for its product, in order:

- every item's tax is linear in the line's net: item i's coefficient c_i is rate_i / 100 times 1
  (simple) or times 1 + the coefficients of every earlier item (compound, "tax on tax");
- inclusive items are inside `amount`: net = amount / (1 + sum of inclusive c_i), and each item's
  exact tax is amount x c_i / (1 + sum of inclusive c_i), one correctly rounded division, so a tax
  whose exact value ends in .5 minor units is seen as such and rounds up;
- exclusive items add on top of `amount`.

Rounding is half-up (never banker's) to whole minor units:

- LINE: every item of every line is rounded; the line's priced amount is rounded (a fractional
  quantity can make it fractional); net = priced - inclusive taxes, gross = priced + exclusive taxes.
- DOCUMENT: each item's exact taxes are summed over the lines and rounded once, and so is the priced
  amount; each rounded total is then allocated back to the lines by largest remainder (floor every
  share, give the missing units to the largest fractions, earlier lines first on ties), so the lines
  always sum to the document's totals.

Either way net + tax = gross holds exactly on every line and in the totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Context, Decimal, localcontext

# Coefficients of a compound chain gain about six digits per item; MAX_ITEMS_PER_GROUP x 7 digits
# plus the amounts fit with room to spare, so nothing before the final rounding is inexact except
# the one division by the inclusive factor (correctly rounded at this precision).
PRECISION = 200
CONTEXT = Context(prec=PRECISION, rounding=ROUND_HALF_UP)
ONE = Decimal(1)
HUNDRED = Decimal(100)

LINE, DOCUMENT = "LINE", "DOCUMENT"


@dataclass(frozen=True)
class Rate:
    item_id: int
    name: str
    rate: Decimal  # percent
    inclusive: bool = False
    compound: bool = False


@dataclass(frozen=True)
class Line:
    amount: Decimal  # quantity x unit price - discount, in minor units, >= 0
    rates: tuple[Rate, ...] = ()


@dataclass
class ItemTax:
    rate: Rate
    exact: Decimal
    amount: int = 0


@dataclass
class LineTax:
    exact_priced: Decimal
    items: list[ItemTax]
    priced: int = 0
    net: int = 0
    tax: int = 0
    gross: int = 0


@dataclass
class QuoteTax:
    rounding: str
    lines: list[LineTax]
    net: int = 0
    tax: int = 0
    gross: int = 0
    by_item: dict[int, int] = field(default_factory=dict)  # tax item id -> total tax


def round_half_up(value: Decimal) -> int:
    """Half-up to a whole minor unit (half away from zero; amounts here are never negative)."""
    return int(value.quantize(ONE, rounding=ROUND_HALF_UP, context=CONTEXT))


def line_amount(quantity: Decimal, unit_price: int, discount: int = 0) -> Decimal:
    """Quantity x unit price - discount, exact."""
    return CONTEXT.subtract(CONTEXT.multiply(quantity, Decimal(unit_price)), Decimal(discount))


def allocate(total: int, shares: Sequence[Decimal]) -> list[int]:
    """Whole units summing to `total` (the rounded sum of the non-negative `shares`): floor each,
    then one more unit to each of the largest fractional parts, the earlier share first on ties."""
    floors = [int(share.to_integral_value(rounding=ROUND_FLOOR)) for share in shares]
    missing = total - sum(floors)
    if not 0 <= missing <= len(shares):
        raise ValueError(f"cannot allocate {total} over shares summing to {sum(shares)}")
    with localcontext(CONTEXT):
        order = sorted(range(len(shares)), key=lambda index: (-(shares[index] - floors[index]), index))
    for index in order[:missing]:
        floors[index] += 1
    return floors


def exact_line(line: Line) -> LineTax:
    """The line's exact figures (call under CONTEXT)."""
    coefficients: list[Decimal] = []
    earlier = Decimal(0)
    for rate in line.rates:
        coefficient = (ONE + earlier if rate.compound else ONE) * rate.rate / HUNDRED
        coefficients.append(coefficient)
        earlier += coefficient
    inclusive_factor = ONE + sum((c for c, r in zip(coefficients, line.rates, strict=True) if r.inclusive), Decimal(0))
    items = [
        ItemTax(rate=rate, exact=line.amount * coefficient / inclusive_factor)
        for rate, coefficient in zip(line.rates, coefficients, strict=True)
    ]
    return LineTax(exact_priced=line.amount, items=items)


def _settle(line: LineTax) -> None:
    inclusive = sum(item.amount for item in line.items if item.rate.inclusive)
    exclusive = sum(item.amount for item in line.items if not item.rate.inclusive)
    line.net = line.priced - inclusive
    line.tax = inclusive + exclusive
    line.gross = line.priced + exclusive


def compute(lines: Sequence[Line], *, rounding: str = LINE) -> QuoteTax:
    """The taxes of `lines` rounded per `rounding` (LINE or DOCUMENT)."""
    with localcontext(CONTEXT):
        return _compute(lines, rounding)


def _compute(lines: Sequence[Line], rounding: str) -> QuoteTax:
    results = [exact_line(line) for line in lines]
    if rounding == LINE:
        for result in results:
            result.priced = round_half_up(result.exact_priced)
            for item in result.items:
                item.amount = round_half_up(item.exact)
    elif rounding == DOCUMENT:
        priced = [result.exact_priced for result in results]
        for result, amount in zip(results, allocate(round_half_up(sum(priced, Decimal(0))), priced), strict=True):
            result.priced = amount
        by_item: dict[int, list[ItemTax]] = {}
        for result in results:
            for item in result.items:
                by_item.setdefault(item.rate.item_id, []).append(item)
        for shares in by_item.values():
            exact = [item.exact for item in shares]
            for item, amount in zip(shares, allocate(round_half_up(sum(exact, Decimal(0))), exact), strict=True):
                item.amount = amount
    else:
        raise ValueError(f"unknown rounding {rounding!r}")
    quote = QuoteTax(rounding=rounding, lines=results)
    for result in results:
        _settle(result)
        quote.net += result.net
        quote.tax += result.tax
        quote.gross += result.gross
        for item in result.items:
            quote.by_item[item.rate.item_id] = quote.by_item.get(item.rate.item_id, 0) + item.amount
    return quote
