"""Target `finance`: vouchers posted per second on a few hot accounts (issue 15, performance).

(a) finance's registered payment.success batch handler under the kernel's consumer runner (finance's
    alias and processed-message table): a SALE voucher of 2 lines per message, debiting one of three
    accounts (cash, bank, receivable) and crediting the merchant's one SALES account;
(b) vouchers of 10 lines under the same runner (finance's alias and processed-message table): no
    product consumer posts 10 lines, so a bench batch handler decodes each message into a posting
    with a source and hands the batch to services.vouchers_post_many, the function every finance
    consumer posts through; the lines land on the same five accounts;
(c) POST /v1/api/finance/vouchers with 2 lines, 32 connections, through the nginx gateway to the
    all-in-one WSGI server (HTTP Basic of a platform service);
(d) the same with 10 lines;
(e) GET /v1/api/finance/accounts/{id}, the DRF primary-key read of the same service, same run.
After each case the books are checked: every voucher balances per currency, each account's balance
equals the sum of its lines, each account's lines carry postingSequence 1..N without gap or repeat
with balanceAfter the running sum in that order, and voucher numbers run 1..N without gap.
Target: (a) at least 1,000 vouchers/s. Runner figures exclude the group join: the clock runs from
the end of the first handled batch to the last.

Each run books into a fresh merchant (its default chart created by services.accounts_ensure_defaults),
so the checks cover exactly what the run posted.
"""

from __future__ import annotations

import json
import time
import uuid

from benchmarks.events import _topic
from benchmarks.framework import Context, Request, bench_service_header, produce_keyed, run_registered_consumer

FIRST_MERCHANT = 9_990_004_000_000
VOUCHERS_2 = 10_000
VOUCHERS_10 = 2_000
REST_BODIES = 200  # distinct request bodies sent in turn (no Idempotency-Key: each request posts)
CONNECTIONS = 32
MIN_VOUCHER_RATE = 1_000
HOT_DEBIT_ROLES = ("CASH", "BANK", "RECEIVABLE")
HOT_CREDIT_ROLES = ("SALES", "PAYABLE")


def bench_books() -> dict[str, object]:
    """A fresh merchant's default chart in EUR, by system role."""
    from apps.finance import services

    merchant_id = FIRST_MERCHANT + int(time.time()) % 1_000_000 * 100 + uuid.uuid4().int % 100
    return {account.system_role: account for account in services.accounts_ensure_defaults(merchant_id=merchant_id, currency="EUR")}


def _paid(chart: dict, n: int, run_id: str) -> dict:
    account = chart[HOT_DEBIT_ROLES[n % len(HOT_DEBIT_ROLES)]]
    attempt = f"f{run_id}-{n}"
    return {
        "event": "pay:attempt.success",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "source": "payment",
        "transaction": {"id": attempt, "sourceId": attempt, "status": "SETTLED", "merchantId": str(account.merchant_id)},
        "attempt": {"id": attempt, "code": attempt, "status": "302_SUCCESS", "amount": 100 + n % 900, "financeAccountId": str(account.id)},
    }


def _ten_lines(chart: dict, n: int) -> list[dict]:
    """5 debits over the hot debit accounts and 5 credits over the hot credit accounts, balanced."""
    amounts = [100 + (n + k) % 50 for k in range(5)]
    debits = [{"accountId": str(chart[HOT_DEBIT_ROLES[k % 3]].id), "debit": amount} for k, amount in enumerate(amounts)]
    credits = [{"accountId": str(chart[HOT_CREDIT_ROLES[k % 2]].id), "credit": amount} for k, amount in enumerate(amounts)]
    return debits + credits


def post_ten_line_vouchers(messages) -> None:
    """The bench's 10-line batch handler: each message one posting with its source, the batch
    posted by services.vouchers_post_many like finance's event consumers."""
    from apps.finance import services

    services.vouchers_post_many(
        postings=[
            {
                "merchant_id": int(m.value["merchantId"]),
                "kind": "PAYMENT",
                "lines": [
                    {"account_id": int(line["accountId"]), "debit": line.get("debit", 0), "credit": line.get("credit", 0)}
                    for line in m.value["lines"]
                ],
                "memo": "bench",
                "source_type": "bench",
                "source_id": m.value["sourceId"],
            }
            for m in messages
        ]
    )


def bench_consumer(ctx: Context, name: str, topic: str, count: int, handler=None) -> dict:
    """finance's registered payment.success consumer (or `handler` under its alias and
    processed-message table) under the runner, on `topic` in a fresh group."""
    from apps.finance.consumers import PAYMENT_CONSUMER

    return run_registered_consumer(ctx, name, consumer=PAYMENT_CONSUMER, topic=topic, count=count, unit="vouchers/s", handler=handler)


INVARIANTS = {
    # every voucher balances in each currency
    "unbalanced_vouchers": """
        SELECT count(*) FROM (SELECT 1 FROM finance_transaction WHERE merchant_id = %(m)s
        GROUP BY finance_voucher_id, currency HAVING sum(debit) <> sum(credit)) t""",
    # each account's balance is the sum of its lines on its normal side
    "balance_mismatches": """
        SELECT count(*) FROM finance_account a LEFT JOIN (
          SELECT account_id, sum(debit) AS d, sum(credit) AS c, count(*) AS n, max(posting_sequence) AS top
          FROM finance_transaction WHERE merchant_id = %(m)s GROUP BY account_id) s ON s.account_id = a.id
        WHERE a.merchant_id = %(m)s AND (
          a.balance <> CASE WHEN a.normal_side = 'DEBIT' THEN coalesce(s.d, 0) - coalesce(s.c, 0)
                            ELSE coalesce(s.c, 0) - coalesce(s.d, 0) END
          OR a.posting_sequence <> coalesce(s.n, 0) OR a.posting_sequence <> coalesce(s.top, 0))""",
    # postingSequence 1..N per account in posting order, balanceAfter the running sum in that order
    "sequence_breaks": """
        SELECT count(*) FROM (
          SELECT t.posting_sequence, t.balance_after,
                 row_number() OVER w AS expected_sequence,
                 sum(CASE WHEN a.normal_side = 'DEBIT' THEN t.debit - t.credit ELSE t.credit - t.debit END) OVER w AS running
          FROM finance_transaction t JOIN finance_account a ON a.id = t.account_id
          WHERE t.merchant_id = %(m)s
          WINDOW w AS (PARTITION BY t.account_id ORDER BY t.posting_sequence ROWS UNBOUNDED PRECEDING)) s
        WHERE posting_sequence <> expected_sequence OR balance_after <> running""",
    # voucher numbers 1..N per fiscal year, the counter at N
    "number_gaps": """
        SELECT count(*) FROM (SELECT v.fiscal_year, count(*) AS n, count(DISTINCT v.number) AS distinct_n,
                                     min(v.number) AS low, max(v.number) AS high, max(c.last_number) AS counter
          FROM finance_voucher v JOIN finance_voucher_counter c ON c.merchant_id = v.merchant_id AND c.fiscal_year = v.fiscal_year
          WHERE v.merchant_id = %(m)s GROUP BY v.fiscal_year) y
        WHERE low <> 1 OR high <> n OR distinct_n <> n OR counter <> n""",
}


def check_books(ctx: Context, case: str, merchant_id: int, expected_vouchers: int | None = None) -> dict:
    """The four invariants over the merchant's books; `expected_vouchers`: how many the case posted in all."""
    from django.db import connections

    with connections["finance"].cursor() as cursor:
        found = {}
        for name, sql in INVARIANTS.items():
            cursor.execute(sql, {"m": merchant_id})
            found[name] = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM finance_voucher WHERE merchant_id = %s", [merchant_id])
        vouchers = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM finance_transaction WHERE merchant_id = %s", [merchant_id])
        lines = cursor.fetchone()[0]
    sound = not any(found.values()) and (expected_vouchers is None or vouchers == expected_vouchers)
    return ctx.record(f"check: {case} invariants", vouchers=vouchers, lines=lines, **found, value=sum(found.values()), passed=sound)


def voucher_requests(chart: dict, headers: dict[str, str], lines: int) -> list[Request]:
    header_items = tuple({**headers, "Content-Type": "application/json"}.items())
    merchant = str(chart["CASH"].merchant_id)
    bodies = []
    for n in range(REST_BODIES):
        if lines == 2:
            amount = 100 + n
            account = chart[HOT_DEBIT_ROLES[n % 3]]
            body_lines = [{"accountId": str(account.id), "debit": amount}, {"accountId": str(chart["SALES"].id), "credit": amount}]
        else:
            body_lines = _ten_lines(chart, n)
        body = {"merchantId": merchant, "kind": "PAYMENT", "memo": f"bench {n}", "lines": body_lines}
        bodies.append(Request("/v1/api/finance/vouchers", "POST", json.dumps(body), header_items))
    return bodies


def run(ctx: Context) -> list[dict]:
    ctx.django()
    from django.db import connections
    from kafka import KafkaAdminClient

    from merchant_platform.messaging.config import client_options

    admin = KafkaAdminClient(**client_options("bench-admin"))
    results, topics = [], []
    run_id = uuid.uuid4().hex[:8]
    try:
        chart = bench_books()
        merchant_id = chart["CASH"].merchant_id
        ctx.say(f"  merchant {merchant_id}: hot accounts {', '.join(HOT_DEBIT_ROLES + HOT_CREDIT_ROLES)}")

        topic = _topic(admin, "finance-2")
        topics.append(topic)
        produce_keyed(topic, [(f"f{run_id}-{n}", _paid(chart, n, run_id)) for n in range(VOUCHERS_2)])
        two = bench_consumer(ctx, "(a) consumer, 2-line SALE vouchers (payment.success)", topic, VOUCHERS_2)
        results += [two, check_books(ctx, "(a)", merchant_id, VOUCHERS_2)]

        topic = _topic(admin, "finance-10")
        topics.append(topic)
        produce_keyed(
            topic,
            [
                (f"t{run_id}-{n}", {"merchantId": str(merchant_id), "sourceId": f"t{run_id}-{n}", "lines": _ten_lines(chart, n)})
                for n in range(VOUCHERS_10)
            ],
        )
        ten = bench_consumer(ctx, "(b) consumer, 10-line vouchers (vouchers_post_many)", topic, VOUCHERS_10, post_ten_line_vouchers)
        results += [ten, check_books(ctx, "(a)+(b)", merchant_id, VOUCHERS_2 + VOUCHERS_10)]
    finally:
        if topics:
            admin.delete_topics(topics)
        admin.close()
        connections.close_all()

    headers = {"Authorization": bench_service_header(ctx)}
    with ctx.platform() as url:
        for case, lines in (("(c)", 2), ("(d)", 10)):
            load = ctx.load(
                f"{case} POST voucher, {lines} lines",
                url,
                requests=voucher_requests(chart, headers, lines),
                expect_status=201,
                connections=CONNECTIONS,
                server="nginx + platform",
            )
            results += [load, check_books(ctx, f"(a)..{case}", merchant_id)]
            connections.close_all()
        results.append(
            ctx.load(
                "(e) DRF primary-key read (account)",
                url,
                requests=[Request(f"/v1/api/finance/accounts/{chart['SALES'].id}", headers=tuple(headers.items()))],
                connections=CONNECTIONS,
                server="nginx + platform",
            )
        )
    connections.close_all()
    failed = sum(result["errors"] + result["non_2xx"] for result in results if "errors" in result)
    results.append(
        ctx.record(f"check: (a) >= {MIN_VOUCHER_RATE:,} vouchers/s", value=round(two["rate"]), passed=two["rate"] >= MIN_VOUCHER_RATE)
    )
    results.append(ctx.record(f"check: no failed request at {CONNECTIONS} connections", value=failed, passed=failed == 0))
    return results
