"""The posting core through the service functions: the default chart, balanced postings that move
balances and posting sequences together, immutable lines (enforced by the database), gapless
voucher numbers, voids by reversal, kinds, overdrafts, control accounts and refused input."""

from __future__ import annotations

import datetime

import pytest
from django.db import DatabaseError, connections, transaction
from rest_framework.exceptions import APIException

from apps.finance import services
from apps.finance.models import Account, FinanceTransaction, Voucher, VoucherCounter
from merchant_platform.errors import ApiError
from tests.finance.conftest import books, invariant_violations, new_merchant_id, post

pytestmark = pytest.mark.django_db(databases="__all__")


def test_default_chart_has_control_accounts_and_is_idempotent():
    merchant = new_merchant_id()
    first = services.accounts_ensure_defaults(merchant_id=merchant, currency="EUR", created_by=7)
    again = services.accounts_ensure_defaults(merchant_id=merchant, currency="EUR")
    assert {a.system_role for a in first} >= {"INVENTORY", "COGS", "SALES", "CASH"}
    assert sorted(a.id for a in first) == sorted(a.id for a in again)
    assert Account.objects.filter(merchant_id=merchant).count() == len(services.DEFAULT_CHART)
    inventory = Account.objects.get(merchant_id=merchant, system_role="INVENTORY")
    assert (inventory.type, inventory.normal_side, inventory.created_by) == ("ASSET", "DEBIT", 7)
    assert Account.objects.get(merchant_id=merchant, system_role="COGS").type == "EXPENSE"


def test_posting_moves_balances_and_sequences_with_its_lines():
    chart = books()
    voucher = post(chart["CASH"], chart["SALES"], 1250, memo="Counter sale")
    cash, sales = (Account.objects.get(pk=chart[r].pk) for r in ("CASH", "SALES"))
    assert (cash.balance, cash.posting_sequence, sales.balance, sales.posting_sequence) == (1250, 1, 1250, 1)
    lines = list(FinanceTransaction.objects.filter(voucher=voucher).order_by("line_number"))
    assert [(line.line_number, line.debit, line.credit, line.posting_sequence, line.balance_after) for line in lines] == [
        (1, 1250, 0, 1, 1250),
        (2, 0, 1250, 1, 1250),
    ]
    post(chart["BANK"], chart["CASH"], 1000, kind="PAYMENT")
    cash.refresh_from_db()
    assert (cash.balance, cash.posting_sequence) == (250, 2)
    assert invariant_violations([voucher.merchant_id]) == []


def test_voucher_numbers_are_gapless_per_merchant_and_year_and_a_refused_posting_gives_its_number_back():
    chart, other = books(), books()
    this_year = [post(chart["CASH"], chart["SALES"], 1) for _ in range(2)]
    with pytest.raises(ApiError):
        with transaction.atomic(using="finance"):
            post(chart["CASH"], chart["SALES"], 1)
            raise ApiError("abandoned")  # the posting's transaction rolls back with its number
    this_year.append(post(chart["CASH"], chart["SALES"], 1))
    next_year = post(chart["CASH"], chart["SALES"], 1, date=datetime.date(2031, 1, 2))
    elsewhere = post(other["CASH"], other["SALES"], 1)
    assert [v.number for v in this_year] == [1, 2, 3]
    assert this_year[0].voucher_number == f"{this_year[0].fiscal_year}-000001"
    assert (next_year.voucher_number, elsewhere.number) == ("2031-000001", 1)
    assert VoucherCounter.objects.get(merchant_id=chart["CASH"].merchant_id, fiscal_year=2031).last_number == 1


def test_posted_lines_cannot_be_updated_or_deleted_even_in_raw_sql():
    chart = books()
    line = FinanceTransaction.objects.filter(voucher=post(chart["CASH"], chart["SALES"], 500)).first()
    for attempt in (
        lambda: FinanceTransaction.objects.filter(pk=line.pk).update(debit=1),
        lambda: FinanceTransaction.objects.filter(pk=line.pk).hard_delete(),
        line.delete,  # a soft delete is an UPDATE: refused too
    ):
        with pytest.raises(DatabaseError, match="immutable"), transaction.atomic(using="finance"):
            attempt()
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic(using="finance"):
        with connections["finance"].cursor() as cursor:
            cursor.execute("DELETE FROM finance_transaction WHERE id = %s", [line.pk])
    assert FinanceTransaction.objects.get(pk=line.pk).debit == line.debit


@pytest.mark.parametrize(
    ("lines", "field"),
    [
        ([{"debit": 100}, {"credit": 90}], "lines"),  # unbalanced
        ([{"debit": 100}], "lines"),  # one line
        ([{"debit": -5}, {"credit": -5}], "lines.0.debit"),
        ([{"debit": 1.5}, {"credit": 1.5}], "lines.0.debit"),
        ([{"debit": True}, {"credit": 1}], "lines.0.debit"),
        ([{"debit": 5, "credit": 5}, {"credit": 0}], "lines.0"),
        ([{"debit": 0}, {"credit": 0}], "lines.0"),
        ([{"debit": 100, "currency": "USD"}, {"credit": 100}], "lines.0.currency"),
    ],
)
def test_bad_lines_are_refused_naming_the_problem_and_nothing_is_posted(lines, field):
    chart = books()
    accounts = [chart["CASH"], chart["SALES"]]
    raw = [{"account_id": accounts[i].id, **line} for i, line in enumerate(lines)]
    with pytest.raises(APIException) as raised:
        services.voucher_post(merchant_id=chart["CASH"].merchant_id, kind="SALE", lines=raw)
    assert raised.value.status_code == 400
    assert field in raised.value.detail
    assert not Voucher.objects.filter(merchant_id=chart["CASH"].merchant_id).exists()
    assert Account.objects.get(pk=chart["CASH"].pk).posting_sequence == 0


def test_another_merchants_account_and_mixed_currencies_are_refused():
    chart, foreign, usd = books(), books(), None
    usd = books(chart["CASH"].merchant_id, currency="USD")
    merchant = chart["CASH"].merchant_id
    for lines, field in (
        ([(chart["CASH"], "debit"), (foreign["SALES"], "credit")], "lines.1.accountId"),
        ([(chart["CASH"], "debit"), (usd["SALES"], "credit")], "lines"),  # EUR 100 vs USD 100: each unbalanced
    ):
        with pytest.raises(APIException) as raised:
            services.voucher_post(merchant_id=merchant, kind="SALE", lines=[{"account_id": a.id, side: 100} for a, side in lines])
        assert field in raised.value.detail
    assert Account.objects.get(pk=foreign["SALES"].pk).posting_sequence == 0


def test_a_voucher_balanced_in_each_of_two_currencies_posts():
    chart = books()
    usd = books(chart["CASH"].merchant_id, currency="USD")
    voucher = services.voucher_post(
        merchant_id=chart["CASH"].merchant_id,
        kind="SALE",
        lines=[
            {"account_id": chart["CASH"].id, "debit": 100},
            {"account_id": chart["SALES"].id, "credit": 100},
            {"account_id": usd["CASH"].id, "debit": 70},
            {"account_id": usd["SALES"].id, "credit": 70},
        ],
    )
    assert voucher.lines.count() == 4


def test_adjustment_needs_a_reason_and_only_adjustments_have_one():
    chart = books()
    with pytest.raises(APIException, match="reason"):
        post(chart["CASH"], chart["CASH_OVER_SHORT"], 5, kind="ADJUSTMENT")
    with pytest.raises(APIException, match="reason"):
        post(chart["CASH"], chart["SALES"], 5, kind="SALE", reason="correction")
    voucher = post(chart["CASH_OVER_SHORT"], chart["CASH"], 5, kind="ADJUSTMENT", reason="cash_count")
    assert (voucher.kind, voucher.reason) == ("ADJUSTMENT", "cash_count")


def test_void_posts_a_balanced_reversal_and_restores_balances():
    chart = books()
    voucher = post(chart["CASH"], chart["SALES"], 800)
    voided = services.voucher_void(voucher_id=voucher.id)
    reversal = Voucher.objects.get(reverses=voucher)
    assert (voided.status, reversal.kind, reversal.number) == ("voided", "REVERSAL", voucher.number + 1)
    assert [(line.account_id, line.debit, line.credit) for line in reversal.lines.order_by("line_number")] == [
        (chart["CASH"].id, 0, 800),
        (chart["SALES"].id, 800, 0),
    ]
    cash = Account.objects.get(pk=chart["CASH"].pk)
    assert (cash.balance, cash.posting_sequence) == (0, 2)
    with pytest.raises(ApiError) as again:
        services.voucher_void(voucher_id=voucher.id)
    assert (again.value.status_code, again.value.get_codes()) == (409, "VOUCHER_ALREADY_VOIDED")
    with pytest.raises(ApiError) as reversal_void:
        services.voucher_void(voucher_id=reversal.id)
    assert reversal_void.value.get_codes() == "VOUCHER_NOT_VOIDABLE"
    assert invariant_violations([voucher.merchant_id]) == []


@pytest.mark.parametrize("kind", ["COGS", "INVENTORY_ADJUSTMENT"])
def test_inventory_vouchers_are_not_voidable(kind):
    chart = books()
    voucher = (
        services.cogs_post(merchant_id=chart["COGS"].merchant_id, order_id="o-1", currency="EUR", amount=300)
        if kind == "COGS"
        else services.inventory_adjustment_post(merchant_id=chart["COGS"].merchant_id, reference="ADJ:1", currency="EUR", value=-300)
    )
    with pytest.raises(ApiError) as raised:
        services.voucher_void(voucher_id=voucher.id)
    assert (raised.value.status_code, raised.value.get_codes()) == (409, "VOUCHER_NOT_VOIDABLE")
    assert Voucher.objects.get(pk=voucher.id).status == "issued"


def test_event_kinds_debit_and_credit_the_documented_accounts():
    chart = books()
    merchant = chart["CASH"].merchant_id
    sale = services.sale_post_from_payment(finance_account_id=chart["BANK"].id, amount=1000, attempt_id="att-1", merchant_id=merchant)
    cogs = services.cogs_post(merchant_id=merchant, order_id="o-1", currency="EUR", amount=600)
    gain = services.inventory_adjustment_post(merchant_id=merchant, reference="CYCLE_COUNT:1", currency="EUR", value=50)
    loss = services.inventory_adjustment_post(merchant_id=merchant, reference="ADJUSTMENT:2", currency="EUR", value=-20)

    def sides(voucher):
        return [(line.account.system_role, "D" if line.debit else "C") for line in voucher.lines.order_by("line_number")]

    assert (sale.kind, sides(sale)) == ("SALE", [("BANK", "D"), ("SALES", "C")])
    assert (cogs.kind, sides(cogs)) == ("COGS", [("COGS", "D"), ("INVENTORY", "C")])
    assert sides(gain) == [("INVENTORY", "D"), ("INVENTORY_ADJUSTMENTS", "C")]
    assert sides(loss) == [("INVENTORY_ADJUSTMENTS", "D"), ("INVENTORY", "C")]
    assert Account.objects.get(pk=chart["INVENTORY"].pk).balance == -570  # an overdraft is allowed


def test_a_source_posts_once_and_a_replay_returns_the_voucher_with_a_log_line(log_lines):
    chart = books()
    first = services.cogs_post(merchant_id=chart["COGS"].merchant_id, order_id="o-9", currency="EUR", amount=300)
    again = services.cogs_post(merchant_id=chart["COGS"].merchant_id, order_id="o-9", currency="EUR", amount=300)
    assert again.id == first.id
    assert Voucher.objects.filter(merchant_id=chart["COGS"].merchant_id).count() == 1
    assert log_lines.matching("finance.voucher.idempotent_replay", str(first.id))


def test_going_below_zero_is_allowed_and_logged_with_the_new_balance(log_lines, django_capture_on_commit_callbacks):
    chart = books()
    with django_capture_on_commit_callbacks(execute=True, using="finance"):  # the line is written on commit
        post(chart["SALES"], chart["CASH"], 300, kind="PAYMENT")  # cash pays out what it does not hold
    cash = Account.objects.get(pk=chart["CASH"].pk)
    assert cash.balance == -300
    assert log_lines.matching("finance.account.went_negative", f"accountId='{cash.id}'", "balance=-300")


def test_missing_control_account_logs_and_fails_clearly(log_lines):
    merchant = new_merchant_id()
    with pytest.raises(ApiError) as raised:
        services.cogs_post(merchant_id=merchant, order_id="o-1", currency="EUR", amount=10)
    assert raised.value.get_codes() == "CONTROL_ACCOUNT_MISSING"
    assert log_lines.matching("INVENTORY/COGS control account missing", str(merchant))


def test_many_vouchers_post_in_one_batch_numbered_in_order_with_replays_once(log_lines):
    one, two = books(), books()
    existing = services.cogs_post(merchant_id=one["COGS"].merchant_id, order_id="o-1", currency="EUR", amount=5)
    orders = [
        {"merchant_id": chart["COGS"].merchant_id, "order_id": f"o-{n}", "currency": "EUR", "amount": n}
        for n in range(0, 6)
        for chart in (one, two)
    ]
    orders.append({**orders[3]})  # the same order twice in one batch
    vouchers = services.cogs_post_many(orders=orders)
    assert vouchers[2].id == existing.id and vouchers[0] is None is vouchers[1]  # a replay; a cost of 0 posts nothing
    assert vouchers[-1].id == vouchers[3].id
    for chart in (one, two):
        merchant = chart["COGS"].merchant_id
        numbers = list(Voucher.objects.filter(merchant_id=merchant).order_by("number").values_list("number", "source_id"))
        assert [n for n, _ in numbers] == list(range(1, len(numbers) + 1))
        assert Account.objects.get(pk=chart["COGS"].pk).posting_sequence == len(numbers)
    assert [
        s for _, s in Voucher.objects.filter(merchant_id=two["COGS"].merchant_id).order_by("number").values_list("number", "source_id")
    ] == [f"o-{n}/EUR" for n in range(1, 6)]
    assert log_lines.matching("finance.voucher.idempotent_replay", str(vouchers[3].id))
    assert invariant_violations([one["COGS"].merchant_id, two["COGS"].merchant_id]) == []


def test_a_batch_with_one_bad_posting_posts_nothing():
    one, other = books(), books()
    good = {
        "merchant_id": one["CASH"].merchant_id,
        "kind": "SALE",
        "lines": [{"account_id": one["CASH"].id, "debit": 5}, {"account_id": one["SALES"].id, "credit": 5}],
    }
    foreign = {**good, "lines": [{"account_id": one["CASH"].id, "debit": 5}, {"account_id": other["SALES"].id, "credit": 5}]}
    with pytest.raises(APIException):
        services.vouchers_post_many(postings=[good, foreign])
    assert not Voucher.objects.filter(merchant_id=one["CASH"].merchant_id).exists()
    assert Account.objects.get(pk=one["CASH"].pk).posting_sequence == 0


def test_an_inclusive_tax_sale_books_net_revenue_tax_payable_and_gross_cash():
    """VAT 20% included in a price of 1200: cash 1200 (what was paid), revenue 1000, tax payable 200."""
    chart = books()
    merchant = chart["CASH"].merchant_id
    sale = services.sale_post_from_payment(
        finance_account_id=chart["CASH"].id, amount=1200, tax_amount=200, attempt_id="a-1", merchant_id=merchant
    )
    lines = {(line.account.system_role, line.debit, line.credit) for line in sale.lines.select_related("account")}
    assert lines == {("CASH", 1200, 0), ("SALES", 0, 1000), ("TAX_PAYABLE", 0, 200)}
    assert Account.objects.get(merchant_id=merchant, currency="EUR", system_role="TAX_PAYABLE").code == "2100"
    untaxed = services.sale_post_from_payment(finance_account_id=chart["CASH"].id, amount=500, attempt_id="a-2", merchant_id=merchant)
    assert {(line.account.system_role, line.credit) for line in untaxed.lines.all() if line.credit} == {("SALES", 500)}
    with pytest.raises(APIException):
        services.sale_post_from_payment(
            finance_account_id=chart["CASH"].id, amount=100, tax_amount=101, attempt_id="a-3", merchant_id=merchant
        )
    assert invariant_violations([merchant]) == []


@pytest.mark.parametrize(
    ("tax", "total", "attempts", "shares"),
    [
        (200, 1200, [1200], [200]),
        (200, 1200, [600, 600], [100, 100]),
        (100, 300, [100, 100, 100], [33, 34, 33]),  # half-up of the running share, so the parts add up
        (0, 1000, [1000], [0]),
    ],
)
def test_the_tax_of_each_attempt_adds_up_to_the_transactions_tax(tax, total, attempts, shares):
    paid, got = 0, []
    for amount in attempts:
        got.append(services.attempt_tax(tax_amount=tax, transaction_amount=total, paid_before=paid, paid_after=paid + amount))
        paid += amount
    assert got == shares and sum(got) == tax
