"""Reads of finance that are more than one query: the trial balance, an account statement and the
general-ledger export (docs/services/finance.md, "Reports")."""

from __future__ import annotations

import datetime
from collections import defaultdict

from django.db.models import Q, Sum
from django.db.models.functions import Coalesce

from apps.finance.models import Account, FinanceTransaction, Voucher

GL_PAGE_MAX = 1000


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


def account_statement(*, account: Account, date_from: datetime.date, date_to: datetime.date) -> dict:
    """The account's lines dated in [date_from, date_to] with the opening balance (lines before
    `date_from`), the running balance after each line (in date, then posting, order) and the
    closing balance."""
    before = FinanceTransaction.objects.filter(account_id=account.id, date__lt=date_from).aggregate(
        debit=Coalesce(Sum("debit"), 0), credit=Coalesce(Sum("credit"), 0)
    )
    opening = _signed(account, before["debit"], before["credit"])
    running = opening
    entries = []
    lines = (
        FinanceTransaction.objects.filter(account_id=account.id, date__gte=date_from, date__lte=date_to)
        .select_related("voucher")
        .order_by("date", "posting_sequence")
    )
    for line in lines.iterator(chunk_size=2000):
        running += _signed(account, line.debit, line.credit)
        entries.append({"line": line, "running_balance": running})
    return {"account": account, "date_from": date_from, "date_to": date_to, "opening": opening, "entries": entries, "closing": running}


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
