"""Finance test helpers: books made through the service functions, and the invariants of the books."""

from __future__ import annotations

import secrets

from apps.finance import services


def new_merchant_id() -> int:
    """A merchant id no other test uses (commerce's merchants are plain ids here)."""
    return secrets.randbits(60) | (1 << 58)


def books(merchant_id: int | None = None, currency: str = "EUR") -> dict[str, object]:
    """The merchant's default chart (as the MERCHANT stream creates it), by system role."""
    merchant_id = merchant_id or new_merchant_id()
    accounts = services.accounts_ensure_defaults(merchant_id=merchant_id, currency=currency)
    return {account.system_role: account for account in accounts}


def post(debit_account, credit_account, amount: int, **options):
    """A two-line voucher moving `amount` from `credit_account` to `debit_account`."""
    return services.voucher_post(
        merchant_id=debit_account.merchant_id,
        kind=options.pop("kind", "SALE"),
        lines=[{"account_id": debit_account.id, "debit": amount}, {"account_id": credit_account.id, "credit": amount}],
        **options,
    )


def invariant_violations(merchant_ids) -> list:
    """The three invariants of the books (issue 15, item 10), checked in SQL over every line:
    debits equal credits per merchant and currency; each account's balance is the sum of its lines
    on its normal side; each account's lines carry posting sequence 1..N without gap or repeat, N
    being the account's postingSequence. Returns the violations (empty when the books are sound)."""
    from django.db import connections

    ids = [int(m) for m in merchant_ids]
    with connections["finance"].cursor() as cursor:
        cursor.execute(
            "SELECT merchant_id, currency, SUM(debit), SUM(credit) FROM finance_transaction WHERE merchant_id = ANY(%s) "
            "GROUP BY merchant_id, currency HAVING SUM(debit) <> SUM(credit)",
            [ids],
        )
        unbalanced = cursor.fetchall()
        cursor.execute(
            "SELECT a.id, a.balance, a.posting_sequence, "
            "COALESCE(SUM(CASE WHEN a.normal_side = 'DEBIT' THEN t.debit - t.credit ELSE t.credit - t.debit END), 0), "
            "COUNT(t.id), COUNT(DISTINCT t.posting_sequence), COALESCE(MIN(t.posting_sequence), 1), COALESCE(MAX(t.posting_sequence), 0) "
            "FROM finance_account a LEFT JOIN finance_transaction t ON t.account_id = a.id WHERE a.merchant_id = ANY(%s) GROUP BY a.id",
            [ids],
        )
        accounts = cursor.fetchall()
    wrong_balance = [row[:2] + row[3:4] for row in accounts if row[1] != row[3]]
    wrong_sequence = [row for row in accounts if not (row[2] == row[4] == row[5] == row[7] and row[6] == 1)]
    return [
        *(("unbalanced", row) for row in unbalanced),
        *(("balance", row) for row in wrong_balance),
        *(("sequence", row) for row in wrong_sequence),
    ]
