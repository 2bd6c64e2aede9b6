"""Reads of finance that are more than one query: the trial balance, an account statement and the
general-ledger export (docs/services/finance.md, "Reports")."""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterator

from django.db.models import Q, Sum
from django.db.models.functions import Coalesce

from apps.finance.models import Account, FinanceTransaction, Voucher

GL_PAGE_MAX = 1000
STATEMENT_CHUNK = 500  # statement lines fetched (and rendered) at a time
# What a statement entry shows (serializers.StatementEntrySerializer): the line and three of its voucher's fields.
STATEMENT_LINE_FIELDS = (
    *("id", "voucher_id", "line_number", "merchant_id", "account_id", "currency", "debit", "credit"),
    *("posting_sequence", "balance_after", "date", "created_at"),
    *("voucher__voucher_number", "voucher__kind", "voucher__memo"),
)


def _signed(account: Account, debit: int, credit: int) -> int:
    return debit - credit if account.normal_side == Account.Side.DEBIT else credit - debit


def trial_balance(*, merchant_id: int, as_of: datetime.date) -> dict:
    """Every account of the merchant with its debits, credits and balance from the lines dated up to
    `as_of`, and the totals per currency (debits equal credits in each)."""
    sums = {
        row["account_id"]: (row["debit"], row["credit"])
        for row in FinanceTransaction.objects.filter(merchant_id=merchant_id, date__lte=as_of)
        .values("account_id")
        .annotate(debit=Coalesce(Sum("debit"), 0), credit=Coalesce(Sum("credit"), 0))
    }
    totals: dict[str, dict[str, int]] = defaultdict(lambda: {"debit": 0, "credit": 0})
    rows = []
    for account in Account.all_objects.filter(merchant_id=merchant_id).order_by("currency", "code"):
        debit, credit = sums.get(account.id, (0, 0))
        if account.deleted_at is not None and not (debit or credit):
            continue
        totals[account.currency]["debit"] += debit
        totals[account.currency]["credit"] += credit
        rows.append({"account": account, "debit": debit, "credit": credit, "balance": _signed(account, debit, credit)})
    return {
        "merchant_id": merchant_id,
        "as_of": as_of,
        "accounts": rows,
        "totals": [{"currency": currency, **values} for currency, values in sorted(totals.items())],
    }


class Statement:
    """An account's statement for [date_from, date_to]: `opening` (the lines before `date_from`),
    then `entries()`, the lines of the period in date, then posting, order with the running balance
    after each, read through a server-side cursor STATEMENT_CHUNK rows at a time, so a period of any
    length never sits in memory. Iterate `entries()` once; `closing` is the last running balance
    (the opening one for an empty period) once they are exhausted."""

    def __init__(self, *, account: Account, date_from: datetime.date, date_to: datetime.date):
        self.account, self.date_from, self.date_to = account, date_from, date_to
        before = FinanceTransaction.objects.filter(account_id=account.id, date__lt=date_from).aggregate(
            debit=Coalesce(Sum("debit"), 0), credit=Coalesce(Sum("credit"), 0)
        )
        self.opening = self.closing = _signed(account, before["debit"], before["credit"])

    def entries(self) -> Iterator[dict]:
        lines = (
            FinanceTransaction.objects.filter(account_id=self.account.id, date__gte=self.date_from, date__lte=self.date_to)
            .select_related("voucher")
            .only(*STATEMENT_LINE_FIELDS)
            .order_by("date", "posting_sequence")
        )
        for line in lines.iterator(chunk_size=STATEMENT_CHUNK):
            self.closing += _signed(self.account, line.debit, line.credit)
            yield {"line": line, "running_balance": self.closing}


def account_statement(*, account: Account, date_from: datetime.date, date_to: datetime.date) -> Statement:
    """The account's statement for the period (see Statement): opening balance, the period's lines
    with their running balance, streamed, and the closing balance."""
    return Statement(account=account, date_from=date_from, date_to=date_to)


def general_ledger_page(*, merchant_id: int, date_from: datetime.date, date_to: datetime.date, after: tuple | None, limit: int) -> dict:
    """One page of the merchant's posted lines dated in the period, in (date, line id) order, from
    after the cursor `after` = (date, line id). Keyset pagination: every page costs the same and
    nothing holds the period in memory."""
    lines = FinanceTransaction.objects.filter(merchant_id=merchant_id, date__gte=date_from, date__lte=date_to)
    if after is not None:
        lines = lines.filter(Q(date__gt=after[0]) | Q(date=after[0], id__gt=after[1]))
    page = list(
        lines.order_by("date", "id").values(
            "id",
            "date",
            "voucher_id",
            "line_number",
            "account_id",
            "currency",
            "debit",
            "credit",
        )[: limit + 1]
    )
    more = len(page) > limit
    page = page[:limit]
    vouchers = {
        v["id"]: v
        for v in Voucher.all_objects.filter(pk__in={row["voucher_id"] for row in page}).values(
            "id", "voucher_number", "kind", "reason", "status", "memo", "reverses_id"
        )
    }
    accounts = {
        a["id"]: a for a in Account.all_objects.filter(pk__in={row["account_id"] for row in page}).values("id", "code", "name", "type")
    }
    return {
        "entries": [{**row, "voucher": vouchers[row["voucher_id"]], "account": accounts[row["account_id"]]} for row in page],
        "next_cursor": f"{page[-1]['date'].isoformat()}_{page[-1]['id']}" if more else None,
    }
