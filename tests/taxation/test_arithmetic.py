"""Properties of the quote arithmetic (apps/taxation/quotes.py), without a database (hypothesis)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.taxation import quotes

# --- Properties of the arithmetic (no database) ---------------------------------------------------

rates = st.decimals(min_value=0, max_value=100, places=4, allow_nan=False, allow_infinity=False)
amounts = st.integers(min_value=0, max_value=10**12)
quantities = st.decimals(min_value=Decimal("0.0001"), max_value=10_000, places=4, allow_nan=False, allow_infinity=False)


@st.composite
def exclusive_lines(draw):
    chain = tuple(
        quotes.Rate(item_id=index, name=f"T{index}", rate=draw(rates), compound=draw(st.booleans()))
        for index in range(draw(st.integers(min_value=0, max_value=4)))
    )
    count = draw(st.integers(min_value=1, max_value=8))
    return [quotes.Line(amount=quotes.line_amount(draw(quantities), draw(amounts), 0), rates=chain) for _ in range(count)]


def _round(value: Decimal) -> int:
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=exclusive_lines(), rounding=st.sampled_from([quotes.LINE, quotes.DOCUMENT]))
def test_exclusive_tax_net_plus_tax_is_gross_on_every_line_and_in_the_totals(lines, rounding):
    result = quotes.compute(lines, rounding=rounding)
    for line in result.lines:
        assert line.net + line.tax == line.gross
        assert line.net == line.priced  # exclusive: the price is the net
    assert result.net + result.tax == result.gross
    assert (result.net, result.tax, result.gross) == tuple(sum(getattr(line, f) for line in result.lines) for f in ("net", "tax", "gross"))
    with quotes.localcontext(quotes.CONTEXT):
        exact = {rate.item_id: sum((line.items[i].exact for line in result.lines), Decimal(0)) for i, rate in enumerate(lines[0].rates)}
        if rounding == quotes.DOCUMENT:
            # each item is rounded once, half-up, over the document
            assert result.by_item == {item_id: _round(total) for item_id, total in exact.items()}
            assert result.net == _round(sum((line.amount for line in lines), Decimal(0)))
        else:
            for line in result.lines:
                for tax in line.items:
                    assert tax.amount == _round(tax.exact) and abs(tax.amount - tax.exact) <= Decimal("0.5")


@settings(max_examples=200, database=None, deadline=None)
@given(shares=st.lists(st.decimals(min_value=0, max_value=10**9, places=6, allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_allocation_sums_to_the_rounded_total_and_moves_each_share_less_than_one_unit(shares):
    total = _round(sum(shares, Decimal(0)))
    allocated = quotes.allocate(total, shares)
    assert sum(allocated) == total
    assert all(abs(a - s) < 1 for a, s in zip(allocated, shares, strict=True))
