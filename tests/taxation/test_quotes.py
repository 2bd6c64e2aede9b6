"""The quote (issue 17, feature 5): worked examples through the API, and properties of the arithmetic.

Amounts are minor units. Every example was worked by hand; comments give the unrounded taxes.
The properties of the arithmetic: test_arithmetic.py.
"""

from __future__ import annotations

import pytest

from apps.taxation import services
from tests.taxation.conftest import BASE, MERCHANT, OTHER_MERCHANT, item

pytestmark = pytest.mark.django_db(databases="__all__")

VAT10 = [item("VAT", "10")]

# (name, currency, rounding, items, lines as (quantity, unit price, discount), line taxes, (net, tax, gross))
EXAMPLES = [
    ("exclusive", "USD", "LINE", VAT10, [("1", 1000, 0)], [100], (1000, 100, 1100)),
    ("inclusive splits the price", "EUR", "LINE", [item("VAT", "20", inclusive=True)], [("1", 1200, 0)], [200], (1000, 200, 1200)),
    # exact 65.4206: the net takes what the rounded tax leaves of the price
    ("inclusive, inexact", "EUR", "LINE", [item("VAT", "7", inclusive=True)], [("1", 1000, 0)], [65], (935, 65, 1000)),
    # GST 50, QST 9.975% of 1050 = 104.7375
    (
        "compound",
        "CAD",
        "LINE",
        [item("GST", "5"), item("QST", "9.975", compound=True)],
        [("1", 1000, 0)],
        [155],
        (1000, 155, 1155),
    ),
    ("half-up, not banker's: 0.5", "USD", "LINE", [item("T", "5")], [("1", 10, 0)], [1], (10, 1, 11)),
    ("half-up, not banker's: 2.5", "USD", "LINE", [item("T", "5")], [("1", 50, 0)], [3], (50, 3, 53)),
    ("per line: 3 x 0.5", "USD", "LINE", [item("T", "5")], [("1", 10, 0)] * 3, [1, 1, 1], (30, 3, 33)),
    # 1.5 rounds once for the document; the unit goes to the first line of the tie
    ("per document: 3 x 0.5", "USD", "DOCUMENT", [item("T", "5")], [("1", 10, 0)] * 3, [1, 1, 0], (30, 2, 32)),
    # exact 0.4762 each: nothing per line, 1.4286 -> 1 for the document, on the first line
    (
        "per document, inclusive",
        "EUR",
        "DOCUMENT",
        [item("VAT", "5", inclusive=True)],
        [("1", 10, 0)] * 3,
        [1, 0, 0],
        (29, 1, 30),
    ),
    ("per line, inclusive", "EUR", "LINE", [item("VAT", "5", inclusive=True)], [("1", 10, 0)] * 3, [0, 0, 0], (30, 0, 30)),
    ("zero minor digits (JPY)", "JPY", "LINE", VAT10, [("1", 999, 0)], [100], (999, 100, 1099)),
    ("three minor digits (KWD)", "KWD", "LINE", [item("VAT", "5")], [("1", 1250, 0)], [63], (1250, 63, 1313)),
    # 1.5 x 333 = 499.5 -> 500 priced; tax 49.95 -> 50
    ("fractional quantity", "USD", "LINE", VAT10, [("1.5", 333, 0)], [50], (500, 50, 550)),
    ("discount", "USD", "LINE", VAT10, [("2", 1000, 150)], [185], (1850, 185, 2035)),
    # the price holds VAT 10%; a 2% levy is added on the net
    (
        "inclusive and exclusive",
        "EUR",
        "LINE",
        [item("VAT", "10", inclusive=True), item("Levy", "2")],
        [("1", 1100, 0)],
        [120],
        (1000, 120, 1120),
    ),
    # factor 1 + 0.05 + 1.05 x 0.10 = 1.155
    (
        "inclusive compound",
        "EUR",
        "LINE",
        [item("A", "5", inclusive=True), item("B", "10", inclusive=True, compound=True)],
        [("1", 1155, 0)],
        [155],
        (1000, 155, 1155),
    ),
    ("several lines", "USD", "LINE", VAT10, [("3", 199, 0), ("1", 5, 0), ("2", 1234, 68)], [60, 1, 240], (3002, 301, 3303)),
]


def _provisioned(items, product_id: int, merchant_id: int = MERCHANT):
    group = services.tax_group_create(merchant_id=merchant_id, name="g", items=items)
    services.tax_set_provision(product_id=product_id, tax_group_id=group.id)
    return group


@pytest.mark.parametrize("example", EXAMPLES, ids=[example[0] for example in EXAMPLES])
def test_worked_examples(admin, example):
    _, currency, rounding, items, lines, line_taxes, totals = example
    _provisioned(items, product_id=1001)
    services.rounding_policy_set(merchant_id=MERCHANT, mode=rounding)
    body = {
        "merchantId": str(MERCHANT),
        "currency": currency,
        "lines": [{"productId": "1001", "quantity": q, "unitPrice": price, "discount": discount} for q, price, discount in lines],
    }
    response = admin.post(f"{BASE}/quotes", body, format="json")
    assert response.status_code == 200, response.json()
    quote = response.json()
    assert quote["rounding"] == rounding and quote["currency"] == currency
    assert [line["tax"] for line in quote["lines"]] == line_taxes
    assert (quote["totals"]["net"], quote["totals"]["tax"], quote["totals"]["gross"]) == totals
    for line in quote["lines"]:
        assert line["net"] + line["tax"] == line["gross"]
        assert sum(tax["amount"] for tax in line["taxes"]) == line["tax"]
    assert sum(tax["amount"] for tax in quote["totals"]["taxes"]) == quote["totals"]["tax"]


def test_the_answer_shape(admin):
    group = _provisioned([item("GST", "5"), item("QST", "9.975", compound=True)], product_id=1002)
    body = {"merchantId": str(MERCHANT), "currency": "KWD", "lines": [{"productId": "1002", "quantity": "2", "unitPrice": 500}]}
    quote = admin.post(f"{BASE}/quotes", body, format="json").json()
    assert quote["minorDigits"] == 3 and quote["totals"]["grossMajor"] == "1.155"
    line = quote["lines"][0]
    assert line["taxGroupId"] == str(group.id) and line["quantity"] == "2.0000" and line["amount"] == 1000
    assert [(t["name"], t["rate"], t["compound"], t["amount"]) for t in line["taxes"]] == [
        ("GST", "5.0000", False, 50),
        ("QST", "9.9750", True, 105),
    ]


def test_rates_follow_the_quote_date(admin):
    _provisioned([item("VAT", "8", valid_to="2024-12-31"), item("VAT", "9", valid_from="2025-01-01")], product_id=1003)
    body = {"merchantId": str(MERCHANT), "currency": "USD", "lines": [{"productId": "1003", "quantity": "1", "unitPrice": 1000}]}
    assert admin.post(f"{BASE}/quotes", {**body, "date": "2024-06-01"}, format="json").json()["totals"]["tax"] == 80
    assert admin.post(f"{BASE}/quotes", {**body, "date": "2025-06-01"}, format="json").json()["totals"]["tax"] == 90


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"currency": "XYZ"}, "currency"),
        ({"lines": []}, "lines"),
        ({"lines": [{"productId": "1004", "quantity": "0", "unitPrice": 10}]}, "lines.0.quantity"),
        ({"lines": [{"productId": "1004", "quantity": "1.00001", "unitPrice": 10}]}, "lines.0.quantity"),
        ({"lines": [{"productId": "1004", "quantity": "1", "unitPrice": -1}]}, "lines.0.unitPrice"),
        (
            {"lines": [{"productId": "1004", "quantity": "1", "unitPrice": 10}, {"productId": "9", "quantity": "1", "unitPrice": 1}]},
            "lines.1.productId",
        ),
        ({"lines": [{"productId": "1004", "quantity": "2", "unitPrice": 10, "discount": 21}]}, "lines.0.discount"),
        ({"merchantId": str(OTHER_MERCHANT)}, "lines.0.productId"),  # provisioned for another merchant
    ],
)
def test_bad_quotes_name_the_field(admin, change, field):
    _provisioned(VAT10, product_id=1004)
    body = {"merchantId": str(MERCHANT), "currency": "USD", "lines": [{"productId": "1004", "quantity": "1", "unitPrice": 10}], **change}
    response = admin.post(f"{BASE}/quotes", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in [error["field"] for error in response.json()["errors"]]


def test_a_quote_needs_the_permission_in_its_merchant(make_caller):
    _provisioned(VAT10, product_id=1005)
    stranger = make_caller(roles=[("CASHIER", OTHER_MERCHANT)], merchants=[OTHER_MERCHANT]).client()
    body = {"merchantId": str(MERCHANT), "currency": "USD", "lines": [{"productId": "1005", "quantity": "1", "unitPrice": 10}]}
    assert stranger.post(f"{BASE}/quotes", body, format="json").status_code == 403
