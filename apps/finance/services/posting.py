"""Posting vouchers: the only code that changes a balance. In one transaction it locks the
voucher's accounts in primary-key order, takes the next voucher number of the merchant and year,
writes the lines (immutable in the database), moves each account's `balance` and
`posting_sequence` by exactly its lines and publishes `voucher.posted` (voucher_events). A voucher
that does not balance in every currency is refused before anything is written."""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import IntegrityError, connections, transaction
from django.db.models import Q
from django.utils import timezone

from apps.finance.models import Account, FinanceTransaction, Voucher
from apps.finance.services.accounts import DB, Kind, Side
from apps.finance.services.voucher_events import VOUCHER_POSTED, vouchers_announce
from merchant_platform.errors import ApiError, Conflict, InvalidInput
from merchant_platform.logging import get_logger
from merchant_platform.money import AMOUNT_TOO_LARGE, BALANCE_LIMIT_EXCEEDED, MAX_AMOUNT, MAX_BALANCE

log = get_logger(__package__)

MAX_LINES = 500
# Kinds a person may post through the API; COGS, COGS_RETURN and INVENTORY_ADJUSTMENT come from
# inventory's events, REFUND from payment's, REVERSAL from a void.
MANUAL_KINDS = (Kind.SALE, Kind.PAYMENT, Kind.ADJUSTMENT)


@dataclass(frozen=True)
class Line:
    account_id: int
    debit: int
    credit: int
    currency: str | None = None


def amount_too_large(field: str) -> ApiError:
    """400 AMOUNT_TOO_LARGE naming the field (merchant_platform/money.py)."""
    message = f"One amount is at most {MAX_AMOUNT} minor units."
    return ApiError(
        message, code=AMOUNT_TOO_LARGE, status_code=400, extra={"errors": [{"field": field, "code": AMOUNT_TOO_LARGE, "message": message}]}
    )


def _amount(field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput({field: f"Give a whole number of minor units from 0 to {MAX_AMOUNT} (a JSON integer)."})
    if value > MAX_AMOUNT:
        raise amount_too_large(field)
    return value


def _lines(raw: Iterable[Mapping]) -> list[Line]:
    raw = list(raw)
    if len(raw) < 2:
        raise InvalidInput({"lines": "A voucher has at least two lines."})
    if len(raw) > MAX_LINES:
        raise InvalidInput({"lines": f"A voucher has at most {MAX_LINES} lines."})
    lines = []
    for index, item in enumerate(raw):
        debit = _amount(f"lines.{index}.debit", item.get("debit", 0))
        credit = _amount(f"lines.{index}.credit", item.get("credit", 0))
        if (debit > 0) == (credit > 0):
            raise InvalidInput({f"lines.{index}": "Give a debit or a credit above zero, not both."})
        account_id = item.get("account_id")
        if isinstance(account_id, bool) or not isinstance(account_id, int):
            raise InvalidInput({f"lines.{index}.accountId": "Give an account id."})
        lines.append(Line(account_id=account_id, debit=debit, credit=credit, currency=item.get("currency")))
    return lines


def _check_balanced(lines: list[Line], accounts: dict[int, Account]) -> None:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for index, line in enumerate(lines):
        account = accounts.get(line.account_id)
        if account is None:
            raise InvalidInput({f"lines.{index}.accountId": "No account of this merchant has this id."})
        if line.currency is not None and line.currency != account.currency:
            raise InvalidInput({f"lines.{index}.currency": f"The account is kept in {account.currency}, not {line.currency}."})
        totals[account.currency][0] += line.debit
        totals[account.currency][1] += line.credit
    unbalanced = [f"{currency}: debits {d}, credits {c}" for currency, (d, c) in sorted(totals.items()) if d != c]
    if unbalanced:
        raise InvalidInput({"lines": f"The voucher does not balance per currency ({'; '.join(unbalanced)})."})


def _check_kind(kind: str, reason: str) -> None:
    if kind not in Kind.values:
        raise InvalidInput({"kind": f"Give one of {', '.join(Kind.values)}."})
    if kind == Kind.ADJUSTMENT and reason not in Voucher.Reason.values:
        raise InvalidInput({"reason": f"An ADJUSTMENT gives a reason: {' or '.join(Voucher.Reason.values)}."})
    if kind != Kind.ADJUSTMENT and reason:
        raise InvalidInput({"reason": "Only an ADJUSTMENT has a reason."})


def _replay(merchant_id: int, source_type: str, source_id: str) -> Voucher | None:
    voucher = Voucher.all_objects.using(DB).filter(merchant_id=merchant_id, source_type=source_type, source_id=source_id).first()
    if voucher is not None:
        log.info("finance.voucher.idempotent_replay", voucherId=str(voucher.id), sourceType=source_type, sourceId=source_id)
    return voucher


def voucher_post(
    *,
    merchant_id: int,
    kind: str,
    lines: Iterable[Mapping],
    date: datetime.date | None = None,
    memo: str = "",
    reason: str = "",
    source_type: str = "",
    source_id: str = "",
    reverses_id: int | None = None,
    created_by: int | None = None,
) -> Voucher:
    """Post a balanced voucher of `merchant_id` and return it. `lines`: mappings with `account_id`
    and `debit` or `credit` (minor units; optional `currency`, which must be the account's). With a
    source (`source_type`, `source_id`) a second call finds the first voucher and returns it
    (logged `finance.voucher.idempotent_replay`)."""
    _check_kind(kind, reason)
    checked = _lines(lines)
    if source_id:
        existing = _replay(merchant_id, source_type, source_id)
        if existing is not None:
            return existing
    date = date or timezone.localdate()
    try:
        with transaction.atomic(using=DB):
            return _post(
                merchant_id=merchant_id,
                kind=kind,
                lines=checked,
                date=date,
                memo=memo,
                reason=reason,
                source_type=source_type,
                source_id=source_id,
                reverses_id=reverses_id,
                created_by=created_by,
            )
    except IntegrityError:
        # Two deliveries of one source raced; the other committed first.
        existing = _replay(merchant_id, source_type, source_id) if source_id else None
        if existing is None:
            raise
        return existing


def _post(**posting) -> Voucher:
    return _post_many([posting])[0]


def _next_numbers(counts: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Take `k` numbers for each (merchant, year) in one statement; returns the first of each range.
    The counter rows are taken in sorted order (so two batches never wait on each other in a
    circle) and stay locked until the commit: a rolled-back batch gives its numbers back."""
    keys = sorted(counts)
    with connections[DB].cursor() as cursor:
        cursor.execute(
            "INSERT INTO finance_voucher_counter (merchant_id, fiscal_year, last_number) VALUES "  # noqa: S608 (placeholders only)
            + ", ".join(["(%s, %s, %s)"] * len(keys))
            + " ON CONFLICT (merchant_id, fiscal_year) DO UPDATE "
            "SET last_number = finance_voucher_counter.last_number + EXCLUDED.last_number RETURNING merchant_id, fiscal_year, last_number",
            [value for key in keys for value in (*key, counts[key])],
        )
        return {(merchant, year): last - counts[(merchant, year)] + 1 for merchant, year, last in cursor.fetchall()}


def _save_balances(accounts: list[Account]) -> None:
    """Write the locked accounts' new balance and posting sequence in one statement. Django's
    bulk_update builds a CASE per column and account, which cost more CPU than the rest of a
    one-voucher posting (most of it while the hot accounts are locked)."""
    now = timezone.now()
    for account in accounts:  # every locked account carries a line (a foreign one failed the check)
        account.updated_at = now
    table = connections[DB].ops.quote_name(Account._meta.db_table)
    with connections[DB].cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS a SET balance = v.balance, posting_sequence = v.posting_sequence, updated_at = %s "  # noqa: S608 (placeholders only)
            "FROM (VALUES "
            + ", ".join(["(%s::bigint, %s::bigint, %s::bigint)"] * len(accounts))
            + ") AS v (id, balance, posting_sequence) WHERE a.id = v.id",
            [now, *(value for account in accounts for value in (account.id, account.balance, account.posting_sequence))],
        )


def balance_limit_exceeded(account: Account) -> Conflict:
    """409 BALANCE_LIMIT_EXCEEDED naming the account whose balance would pass +-MAX_BALANCE."""
    return Conflict(
        f"The posting would take the balance of account {account.id} ({account.code}, {account.currency}) past "
        f"+-{MAX_BALANCE} minor units; nothing was posted.",
        code=BALANCE_LIMIT_EXCEEDED,
        extra={"accountId": str(account.id)},
    )


def _post_many(postings: list[dict]) -> list[Voucher]:
    """Post checked, fresh postings in the caller's transaction with a fixed number of statements:
    lock every account they touch in primary-key order, check each voucher against its merchant's
    accounts, number them, insert vouchers and lines, update the accounts."""
    ids = sorted({line.account_id for posting in postings for line in posting["lines"]})
    locked = list(Account.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
    before = {account.id: account.balance for account in locked}
    accounts = {account.id: account for account in locked}
    by_merchant: dict[int, dict[int, Account]] = defaultdict(dict)
    for account in locked:
        by_merchant[account.merchant_id][account.id] = account
    for posting in postings:
        _check_balanced(posting["lines"], by_merchant[posting["merchant_id"]])
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for posting in postings:
        counts[(posting["merchant_id"], posting["date"].year)] += 1
    numbers = _next_numbers(counts)
    vouchers, rows, last_voucher = [], [], {}
    for posting in postings:
        year = posting["date"].year
        number = numbers[(posting["merchant_id"], year)]
        numbers[(posting["merchant_id"], year)] += 1
        voucher = Voucher(
            merchant_id=posting["merchant_id"],
            fiscal_year=year,
            number=number,
            voucher_number=f"{year}-{number:06d}",
            kind=posting["kind"],
            reason=posting.get("reason", ""),
            date=posting["date"],
            memo=posting.get("memo", ""),
            source_type=posting.get("source_type", ""),
            source_id=posting.get("source_id", ""),
            reverses_id=posting.get("reverses_id"),
            created_by=posting.get("created_by"),
        )
        vouchers.append(voucher)
        voucher.posted_lines = []
        for number_in_voucher, line in enumerate(posting["lines"], start=1):
            account = accounts[line.account_id]
            movement = line.debit - line.credit
            account.balance += movement if account.normal_side == Side.DEBIT else -movement
            if abs(account.balance) > MAX_BALANCE:  # every line's balance_after is within the limit too
                raise balance_limit_exceeded(account)
            account.posting_sequence += 1
            last_voucher[account.id] = voucher.id
            voucher.posted_lines.append(
                FinanceTransaction(
                    voucher=voucher,
                    line_number=number_in_voucher,
                    merchant_id=voucher.merchant_id,
                    account=account,
                    currency=account.currency,
                    debit=line.debit,
                    credit=line.credit,
                    posting_sequence=account.posting_sequence,
                    balance_after=account.balance,
                    date=voucher.date,
                )
            )
        rows += voucher.posted_lines
    Voucher.objects.using(DB).bulk_create(vouchers)
    FinanceTransaction.objects.using(DB).bulk_create(rows)
    _save_balances(locked)
    # Every posting (API, admin, events, a void's reversal) passes here: voucher.posted, one COPY for the batch.
    vouchers_announce(VOUCHER_POSTED, [(voucher, voucher.posted_lines) for voucher in vouchers])
    for account in locked:
        if account.balance < 0 and account.balance < before[account.id]:
            transaction.on_commit(
                lambda account=account, balance=account.balance: log.warning(
                    "finance.account.went_negative",
                    accountId=str(account.id),
                    merchantId=str(account.merchant_id),
                    code=account.code,
                    currency=account.currency,
                    balance=balance,
                    voucherId=str(last_voucher[account.id]),
                ),
                using=DB,
            )
    return vouchers


def vouchers_post_many(*, postings: list[Mapping]) -> list[Voucher]:
    """Post several vouchers at once (the consumers' batch mode), with the rules of voucher_post:
    each balanced, each source once (a replay, in the books or earlier in the batch, returns the
    voucher it posted and logs finance.voucher.idempotent_replay). One bad posting fails them all:
    the consumer runner then handles each message alone. Returns one voucher per posting."""
    checked = []
    for posting in postings:
        _check_kind(posting["kind"], posting.get("reason", ""))
        checked.append({**posting, "lines": _lines(posting["lines"]), "date": posting.get("date") or timezone.localdate()})
    sources = {(p["merchant_id"], p.get("source_type", ""), p["source_id"]) for p in checked if p.get("source_id")}
    with transaction.atomic(using=DB):
        found: dict[tuple, Voucher] = {}
        if sources:
            # One term per merchant and source type (a batch has one or a few), not one per source:
            # building and planning a 500-term OR costs more than the posting.
            by_kind: dict[tuple[int, str], list[str]] = defaultdict(list)
            for merchant_id, source_type, source_id in sources:
                by_kind[(merchant_id, source_type)].append(source_id)
            wanted = Q()
            for (merchant_id, source_type), source_ids in by_kind.items():
                wanted |= Q(merchant_id=merchant_id, source_type=source_type, source_id__in=source_ids)
            found = {(v.merchant_id, v.source_type, v.source_id): v for v in Voucher.all_objects.using(DB).filter(wanted)}
        fresh, slots, first_of, repeated = [], [], {}, []
        for posting in checked:
            key = (posting["merchant_id"], posting.get("source_type", ""), posting["source_id"]) if posting.get("source_id") else None
            if key in found:
                log.info("finance.voucher.idempotent_replay", voucherId=str(found[key].id), sourceType=key[1], sourceId=key[2])
                slots.append(found[key])
            elif key is not None and key in first_of:
                slots.append(first_of[key])
                repeated.append(key)
            else:
                if key is not None:
                    first_of[key] = len(fresh)
                slots.append(len(fresh))
                fresh.append(posting)
        posted = _post_many(fresh) if fresh else []
    for key in repeated:  # the same source twice in one batch: the second replays the first
        log.info("finance.voucher.idempotent_replay", voucherId=str(posted[first_of[key]].id), sourceType=key[1], sourceId=key[2])
    return [slot if isinstance(slot, Voucher) else posted[slot] for slot in slots]
