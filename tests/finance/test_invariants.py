"""The books' invariants (issue 15, item 10), tested rather than assumed: hypothesis generates runs
of balanced and unbalanced vouchers over a few hot accounts in two currencies, batches of vouchers
(as the consumers post them), voids and replays of sourced postings; three forked processes apply
each run concurrently against the real PostgreSQL; then, for every merchant and currency, debits
equal credits, each account's balance is the sum of its lines, its postingSequence has no gap and
no repeat, and voucher numbers run 1..N without gap."""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import APIException

from apps.finance import services
from apps.finance.models import Voucher
from tests.finance.conftest import books, invariant_violations, new_merchant_id

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
WORKERS = 3
HOT = ("CASH", "BANK", "SALES", "INVENTORY")  # every posting lands on a few hot accounts

amounts = st.integers(min_value=1, max_value=10**6)
pairs = st.lists(st.tuples(st.sampled_from(HOT), st.sampled_from(HOT), amounts), min_size=1, max_size=4)
post_op = st.tuples(st.just("post"), st.sampled_from(["EUR", "USD", "both"]), pairs)
unbalanced_op = st.tuples(st.just("unbalanced"), st.sampled_from(["EUR", "USD"]), pairs, st.integers(-50, 50).filter(bool))
void_op = st.tuples(st.just("void"), st.integers(0, 10**6))
replay_op = st.tuples(st.just("sourced"), st.integers(0, 3), amounts)
batch_op = st.tuples(st.just("batch"), st.lists(st.tuples(st.sampled_from(["EUR", "USD", "both"]), pairs), min_size=1, max_size=5))
operations = st.lists(st.one_of(post_op, unbalanced_op, void_op, replay_op, batch_op), min_size=1, max_size=24)


def _lines(charts, currency, pairs):
    lines = []
    for debit, credit, amount in pairs:
        for code in ("EUR", "USD") if currency == "both" else (currency,):
            lines += [{"account_id": charts[code][debit], "debit": amount}, {"account_id": charts[code][credit], "credit": amount}]
    return lines


def apply_operations(merchant_id: int, charts: dict, ops: list) -> dict:
    """Run in a forked process: apply `ops`, counting outcomes; any error but a refusal fails the run."""
    outcome = {"posted": 0, "refused": 0, "voided": 0, "unexpected": []}
    try:
        for op in ops:
            try:
                if op[0] == "post":
                    services.voucher_post(merchant_id=merchant_id, kind="SALE", lines=_lines(charts, op[1], op[2]))
                    outcome["posted"] += 1
                elif op[0] == "unbalanced":
                    lines = _lines(charts, op[1], op[2])
                    lines[-1]["credit"] += op[3]
                    services.voucher_post(merchant_id=merchant_id, kind="SALE", lines=lines)
                    outcome["unexpected"].append(("unbalanced posted", op))
                elif op[0] == "batch":  # several vouchers at once, as the consumers post
                    postings = [{"merchant_id": merchant_id, "kind": "SALE", "lines": _lines(charts, c, p)} for c, p in op[1]]
                    services.vouchers_post_many(postings=postings)
                    outcome["posted"] += len(postings)
                elif op[0] == "void":
                    ids = list(Voucher.objects.filter(merchant_id=merchant_id, kind="SALE").order_by("id").values_list("id", flat=True))
                    if ids:
                        services.voucher_void(voucher_id=ids[op[1] % len(ids)])
                        outcome["voided"] += 1
                else:
                    services.voucher_post(
                        merchant_id=merchant_id,
                        kind="PAYMENT",
                        lines=[
                            {"account_id": charts["EUR"]["BANK"], "debit": op[2]},
                            {"account_id": charts["EUR"]["CASH"], "credit": op[2]},
                        ],
                        source_type="test",
                        source_id=f"src-{op[1]}",
                    )
            except APIException as exc:  # a refused voucher or void (400, 409): nothing posted
                if op[0] in ("post", "batch") and exc.status_code != 400:
                    outcome["unexpected"].append((repr(exc), op))
                outcome["refused"] += 1
    except Exception as exc:  # reported to the parent, which fails the test
        outcome["unexpected"].append((repr(exc), None))
    finally:
        connections.close_all()
    return outcome


@pytest.fixture(scope="module")
def pool(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        connections.close_all()  # children open their own connections (never a shared socket)
        context = multiprocessing.get_context("fork")
        with context.Pool(WORKERS) as workers:
            yield workers


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=operations)
def test_invariants_hold_under_concurrent_random_postings_voids_and_replays(pool, ops):
    merchant = new_merchant_id()
    charts = {code: {role: account.id for role, account in books(merchant, currency=code).items()} for code in ("EUR", "USD")}
    connections.close_all()
    shares = [ops[i::WORKERS] for i in range(WORKERS)]
    outcomes = pool.starmap(apply_operations, [(merchant, charts, share) for share in shares])
    assert [o["unexpected"] for o in outcomes] == [[]] * WORKERS
    assert invariant_violations([merchant]) == []
    vouchers = Voucher.objects.filter(merchant_id=merchant)
    numbers = sorted(vouchers.values_list("number", flat=True))
    assert numbers == list(range(1, len(numbers) + 1))  # one fiscal year: gapless from 1
    sourced = list(vouchers.filter(source_type="test").values_list("source_id", flat=True))
    assert len(sourced) == len(set(sourced)) == len({op[1] for op in ops if op[0] == "sourced"})
    posted = sum(o["posted"] for o in outcomes)
    assert vouchers.filter(kind="SALE").count() == posted
    assert vouchers.filter(kind="REVERSAL").count() == vouchers.filter(status="voided").count() == sum(o["voided"] for o in outcomes)
