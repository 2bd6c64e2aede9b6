"""payment.success's plain-Python reading (serializers.paid_orders) against PaymentSuccessSerializer:
what the fast path accepts, the serializer accepts with the same result; a canonical value always
takes the fast path; anything the fast path refuses is left to the serializer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.inventory.serializers import PaymentSuccessSerializer, paid_orders

ids = st.one_of(
    st.integers(min_value=-5, max_value=2**64).map(str),
    st.integers(min_value=-5, max_value=2**64),
    st.sampled_from(["", " 12", "12 ", "1_000", "١٢", "²", "12.0", "0x10", None, True, 12.5, [], {}]),
)
tokens = st.one_of(
    st.from_regex(r"[A-Za-z0-9._:-]{1,64}", fullmatch=True),
    st.sampled_from(["", " a", "a ", "a\n", "a" * 65, "a b", "é", "a/b", None, 7, True, []]),
)
quantities = st.one_of(st.integers(min_value=-2, max_value=10**12 + 2), st.sampled_from([True, False, 1.0, "1", None, []]))
lines = st.fixed_dictionaries(
    {"lineId": tokens, "variantId": ids, "quantity": quantities},
    optional={"locationId": ids, "extra": st.integers(), "note": st.text(max_size=3)},
)
values = st.one_of(
    st.fixed_dictionaries(
        {
            "transaction": st.one_of(st.fixed_dictionaries({"sourceId": tokens}, optional={"id": tokens}), st.none(), st.just([])),
            "order": st.one_of(
                st.fixed_dictionaries(
                    {"merchantId": ids, "lines": st.one_of(st.lists(lines, max_size=4), st.none(), st.just({}))},
                    optional={"currency": st.text(max_size=3)},
                ),
                st.none(),
                st.just("order"),
            ),
        },
        optional={"event": st.just("pay:attempt.success")},
    ),
    st.none(),
    st.just([]),
    st.text(max_size=3),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(values, min_size=1, max_size=3))
def test_the_fast_path_agrees_with_the_serializer(batch):
    fast = paid_orders(batch)
    serializer = PaymentSuccessSerializer(data=batch, many=True)
    valid = serializer.is_valid()
    if fast is not None:
        assert valid
        assert fast == [{**order, "lines": [dict(line) for line in order["lines"]]} for order in serializer.validated_data]


def test_a_canonical_value_takes_the_fast_path():
    value = {
        "transaction": {"id": "1", "sourceId": "SO-1:a.b_c"},
        "order": {
            "merchantId": "384051449648644096",
            "lines": [
                {"lineId": "1", "variantId": "9990005000000", "quantity": 3},
                {"lineId": "2", "variantId": 42, "quantity": 1, "locationId": "7"},
            ],
        },
    }
    assert paid_orders([value]) == [
        {
            "order_id": "SO-1:a.b_c",
            "merchant_id": 384051449648644096,
            "lines": [
                {"line_id": "1", "variant_id": 9990005000000, "quantity": 3},
                {"line_id": "2", "variant_id": 42, "quantity": 1, "location_id": 7},
            ],
        }
    ]
    repeated = {**value, "order": {**value["order"], "lines": [value["order"]["lines"][0]] * 2}}
    assert paid_orders([value, repeated]) is None  # a repeated lineId: the serializer names it
