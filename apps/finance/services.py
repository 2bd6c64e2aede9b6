"""Every write of the finance service: the chart of accounts, posting vouchers, voids by reversal,
and the postings events ask for. Functions take ids and keyword arguments,
run in one transaction on finance's alias and raise the kernel's errors, so the API, the admin and
the consumers share the same rules (docs/services/finance.md).

Posting (`voucher_post`) is the only code that changes a balance: in one transaction it locks the
voucher's accounts in primary-key order, takes the next voucher number of the merchant and year,
writes the lines (immutable in the database) and moves each account's `balance` and
`posting_sequence` by exactly its lines. A voucher that does not balance in every currency is
refused before anything is written.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import IntegrityError, connections, transaction
from django.db.models import Q
from django.utils import timezone

from apps.finance.models import VOIDABLE_KINDS, Account, FinanceTransaction, Voucher
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger
from merchant_platform.money import AMOUNT_TOO_LARGE, BALANCE_LIMIT_EXCEEDED, MAX_AMOUNT, MAX_BALANCE

DB = "finance"
log = get_logger(__name__)

MAX_LINES = 500

Kind, Side, Type = Voucher.Kind, Account.Side, Account.Type
NORMAL_SIDE = {
    Type.ASSET: Side.DEBIT,
    Type.EXPENSE: Side.DEBIT,
    Type.LIABILITY: Side.CREDIT,
    Type.EQUITY: Side.CREDIT,
    Type.INCOME: Side.CREDIT,
}
# Kinds a person may post through the API; COGS and INVENTORY_ADJUSTMENT come from inventory's
# events, REVERSAL from a void.
MANUAL_KINDS = (Kind.SALE, Kind.PAYMENT, Kind.ADJUSTMENT)

# System roles: the accounts the platform posts to by itself.
CASH, BANK, RECEIVABLE, INVENTORY, PAYABLE, TAX_PAYABLE, EQUITY, SALES, COGS, INVENTORY_ADJUSTMENTS, CASH_OVER_SHORT = (
    "CASH",
    "BANK",
    "RECEIVABLE",
    "INVENTORY",
    "PAYABLE",
    "TAX_PAYABLE",
    "EQUITY",
    "SALES",
    "COGS",
    "INVENTORY_ADJUSTMENTS",
    "CASH_OVER_SHORT",
)
# The default chart of a merchant (per currency): (code, name, type, system role).
DEFAULT_CHART = (
    ("1000", "Cash", Type.ASSET, CASH),
    ("1010", "Bank", Type.ASSET, BANK),
    ("1100", "Accounts receivable", Type.ASSET, RECEIVABLE),
    ("1200", "Inventory", Type.ASSET, INVENTORY),
    ("2000", "Accounts payable", Type.LIABILITY, PAYABLE),
    ("2100", "Tax payable", Type.LIABILITY, TAX_PAYABLE),
    ("3000", "Owner's equity", Type.EQUITY, EQUITY),
    ("4000", "Sales", Type.INCOME, SALES),
    ("5000", "Cost of goods sold", Type.EXPENSE, COGS),
    ("5100", "Inventory adjustments", Type.EXPENSE, INVENTORY_ADJUSTMENTS),
    ("5900", "Cash over and short", Type.EXPENSE, CASH_OVER_SHORT),
)
CONTROL_ROLES = (INVENTORY, COGS)


class ForeignReference(InvalidInput):
    """An event or a request names a record of another merchant than its own: refused, and no retry
    can fix it (a consumer parks the message at once with this reason)."""

    def __init__(self, message: str):
        super().__init__({"merchantId": message})
        self.message = message

    def __str__(self) -> str:
        return self.message


# --- Accounts -------------------------------------------------------------------------------------


def _chart(merchant_id: int, currency: str, created_by: int | None) -> list[Account]:
    return [
        Account(
            merchant_id=merchant_id,
            code=code,
            name=name,
            type=type_,
            currency=currency,
            normal_side=NORMAL_SIDE[type_],
            system_role=role,
            created_by=created_by,
        )
        for code, name, type_, role in DEFAULT_CHART
    ]


def _charts_insert(charts: Mapping[tuple[int, str], int | None]) -> None:
    """Insert the default chart of each (merchant, currency) -> creator, skipping the accounts that
    exist (`ON CONFLICT DO NOTHING`). One statement, rows in (merchant, currency, code) order: a
    concurrent caller making the same accounts waits for this one's rows and then skips them, and
    two callers never wait for each other in a circle."""
    rows = [account for key in sorted(charts) for account in _chart(*key, charts[key])]
    Account.objects.using(DB).bulk_create(rows, ignore_conflicts=True)


def accounts_ensure_defaults(*, merchant_id: int, currency: str, created_by: int | None = None) -> list[Account]:
    """The merchant's default chart in `currency`, with the control accounts INVENTORY and COGS
    (from the MERCHANT change stream). Idempotent: an account that exists (by code) is kept as it
    is, so replays and snapshots change nothing; concurrent calls insert each account once."""
    with transaction.atomic(using=DB):
        _charts_insert({(merchant_id, currency): created_by})
    return list(Account.objects.using(DB).filter(merchant_id=merchant_id, currency=currency, system_role__in=[r[3] for r in DEFAULT_CHART]))


def account_create(
    *, merchant_id: int, code: str, name: str, type: str, currency: str, normal_side: str | None = None, created_by: int | None = None
) -> Account:
    """A new account of the merchant's chart (balance 0). The code is unique per merchant and currency."""
    account = Account(
        merchant_id=merchant_id,
        code=code,
        name=name,
        type=type,
        currency=currency,
        normal_side=normal_side or NORMAL_SIDE[type],
        created_by=created_by,
    )
    try:
        with transaction.atomic(using=DB):
            account.save(using=DB, force_insert=True)
    except IntegrityError:
        raise Conflict("The merchant has an account with this code in this currency.", code="ACCOUNT_CODE_TAKEN") from None
    return account


def account_update(*, account_id: int, name: str) -> Account:
    """Rename an account; its code, type, currency, side and balance never change."""
    with transaction.atomic(using=DB):
        account = Account.objects.select_for_update().filter(pk=account_id).first()
        if account is None:
            raise NotFound("No account has this id.")
        if account.name != name:
            account.name = name
            account.save(using=DB, update_fields=["name", "updated_at"])
    return account


def control_account(*, merchant_id: int, currency: str, role: str) -> Account:
    """The merchant's account with `role` in `currency`; a missing INVENTORY or COGS control
    account logs `INVENTORY/COGS control account missing` and fails the posting (spec 7)."""
    account = Account.objects.filter(merchant_id=merchant_id, currency=currency, system_role=role).first()
    if account is not None:
        return account
    if role in CONTROL_ROLES:
        log.error("INVENTORY/COGS control account missing", merchantId=str(merchant_id), currency=currency, role=role)
        raise Conflict(f"The merchant has no {role} control account in {currency}.", code="CONTROL_ACCOUNT_MISSING")
    raise Conflict(f"The merchant has no {role} account in {currency}.", code="SYSTEM_ACCOUNT_MISSING")


# --- Posting --------------------------------------------------------------------------------------


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


def voucher_void(*, voucher_id: int, memo: str = "", created_by: int | None = None) -> Voucher:
    """Void an issued, voidable voucher (SALE, PAYMENT, ADJUSTMENT): post a balanced REVERSAL
    voucher with every line on the other side, referencing it, and mark it voided (spec 3.2).
    COGS and INVENTORY_ADJUSTMENT are corrected by a new ADJUSTMENT voucher instead. Returns the
    voided voucher (its reversal is `voucher.reversal`)."""
    with transaction.atomic(using=DB):
        voucher = Voucher.objects.select_for_update().filter(pk=voucher_id).first()
        if voucher is None:
            raise NotFound("No voucher has this id.")
        if voucher.status == Voucher.Status.VOIDED:
            raise Conflict("The voucher is already voided.", code="VOUCHER_ALREADY_VOIDED")
        if voucher.kind not in VOIDABLE_KINDS:
            raise Conflict(
                f"A {voucher.kind} voucher is not voidable; post an ADJUSTMENT voucher to correct it.", code="VOUCHER_NOT_VOIDABLE"
            )
        lines = [
            {"account_id": line.account_id, "debit": line.credit, "credit": line.debit}
            for line in FinanceTransaction.objects.filter(voucher_id=voucher.id).order_by("line_number")
        ]
        voucher_post(
            merchant_id=voucher.merchant_id,
            kind=Kind.REVERSAL,
            lines=lines,
            memo=memo or f"Reversal of {voucher.voucher_number}",
            reverses_id=voucher.id,
            created_by=created_by,
        )
        voucher.status = Voucher.Status.VOIDED
        voucher.voided_at = timezone.now()
        voucher.save(using=DB, update_fields=["status", "voided_at", "updated_at"])
    return voucher


def voucher_correct(*, voucher_id: int, memo: str = "", created_by: int | None = None) -> Voucher:
    """Correct a voucher that is not voidable (COGS, INVENTORY_ADJUSTMENT): post an ADJUSTMENT
    (reason `correction`) with its lines on the other side, once per voucher (a second call returns
    the first correction). The corrected voucher stays issued: both stay in the books (spec 3.2)."""
    voucher = Voucher.objects.filter(pk=voucher_id).first()
    if voucher is None:
        raise NotFound("No voucher has this id.")
    if voucher.kind not in (Kind.COGS, Kind.INVENTORY_ADJUSTMENT):
        raise Conflict(f"A {voucher.kind} voucher is corrected by a void.", code="VOUCHER_VOIDABLE")
    lines = [
        {"account_id": line.account_id, "debit": line.credit, "credit": line.debit}
        for line in FinanceTransaction.objects.filter(voucher_id=voucher.id).order_by("line_number")
    ]
    return voucher_post(
        merchant_id=voucher.merchant_id,
        kind=Kind.ADJUSTMENT,
        reason=Voucher.Reason.CORRECTION,
        lines=lines,
        memo=memo or f"Correction of {voucher.voucher_number}",
        source_type="correction",
        source_id=str(voucher.id),
        created_by=created_by,
    )


# --- Postings from events (spec 6.2) --------------------------------------------------------------
# Each takes a list (a consumer's batch) and posts it with vouchers_post_many; the single forms are
# the same with a list of one.


def _system_accounts(wanted: set[tuple[int, str, str]]) -> dict[tuple[int, str, str], Account]:
    """(merchant, currency, role) -> the account, in one query. A merchant finance keeps books for
    gets its default chart in a currency it has none in yet (or the accounts its chart lacks, such
    as a newer system role), made in the caller's transaction (the first system posting in that
    currency: a sale, a COGS, a stock adjustment), owned like its other accounts. A merchant
    without books (unknown, or not yet seen on the MERCHANT stream) gets nothing: a missing
    INVENTORY or COGS control account logs `INVENTORY/COGS control account missing` and fails the
    posting."""
    if not wanted:
        return {}

    def read() -> dict[tuple[int, str, str], Account]:
        return {
            (a.merchant_id, a.currency, a.system_role): a
            for a in Account.objects.filter(
                merchant_id__in={w[0] for w in wanted}, currency__in={w[1] for w in wanted}, system_role__in={w[2] for w in wanted}
            )
        }

    found = read()
    missing = {(merchant_id, currency) for merchant_id, currency, _ in wanted - set(found)}
    if missing:
        creators = dict(
            Account.all_objects.filter(merchant_id__in={m for m, _ in missing})
            .exclude(system_role="")
            .order_by("merchant_id", "created_at", "id")
            .values_list("merchant_id", "created_by")
            .distinct("merchant_id")
        )
        charts = {(m, currency): creators[m] for m, currency in missing if m in creators}
        if charts:
            _charts_insert(charts)
            for merchant_id, currency in sorted(charts):
                log.info("finance.chart.completed", merchantId=str(merchant_id), currency=currency)
            found = read()
    for merchant_id, currency, role in sorted(wanted - set(found)):
        control_account(merchant_id=merchant_id, currency=currency, role=role)  # logs and raises
    return found


def sales_post_from_payments(*, payments: list[Mapping]) -> list[Voucher]:
    """Successful payments (`finance_account_id`, `merchant_id`, `amount`, `attempt_id`, optional
    `tax_amount`, `currency`, `date`): a SALE voucher each, debiting the finance account the sale
    side chose with the amount paid (the gross) and crediting the merchant's SALES account in the
    payment's currency with the amount less `tax_amount` (the tax included in it: the net revenue)
    and its TAX_PAYABLE account with `tax_amount`. Once per payment attempt.
    The account must be the payment's merchant's (ForeignReference otherwise). A payment in another
    currency than the chosen account's debits the merchant's account of the same system role
    (its CASH, BANK...) in the payment's currency, opening the chart in that currency if needed;
    a custom account in another currency is refused."""
    accounts = Account.objects.in_bulk({p["finance_account_id"] for p in payments})
    debited: dict[int, tuple[int, str, str] | Account] = {}
    for index, payment in enumerate(payments):
        if not 0 <= payment.get("tax_amount", 0) <= payment["amount"]:
            raise InvalidInput({"taxAmount": "The tax included in a payment is from 0 to the amount paid."})
        account = accounts.get(payment["finance_account_id"])
        if account is None:
            raise NotFound("No finance account has the payment's financeAccountId.")
        if account.merchant_id != payment["merchant_id"]:
            raise ForeignReference(
                f"financeAccountId {account.id} is an account of another merchant than the payment's ({payment['merchant_id']})."
            )
        currency = payment.get("currency") or account.currency
        if currency == account.currency:
            debited[index] = account
        elif account.system_role:
            debited[index] = (account.merchant_id, currency, account.system_role)
        else:
            raise InvalidInput({"currency": f"The finance account is kept in {account.currency}, not {currency}."})
    currencies = {(p["merchant_id"], p.get("currency") or accounts[p["finance_account_id"]].currency) for p in payments}
    system = _system_accounts(
        {key for key in debited.values() if isinstance(key, tuple)}
        | {(merchant_id, currency, role) for merchant_id, currency in currencies for role in (SALES, TAX_PAYABLE)}
    )
    postings = []
    for index, payment in enumerate(payments):
        account = debited[index] if isinstance(debited[index], Account) else system[debited[index]]
        tax = payment.get("tax_amount", 0)
        lines = [
            {"account_id": account.id, "debit": payment["amount"]},
            {"account_id": system[(account.merchant_id, account.currency, SALES)].id, "credit": payment["amount"] - tax},
        ]
        if tax:
            lines.append({"account_id": system[(account.merchant_id, account.currency, TAX_PAYABLE)].id, "credit": tax})
        if lines[1]["credit"] == 0:  # all of it tax
            del lines[1]
        postings.append(
            {
                "merchant_id": account.merchant_id,
                "kind": Kind.SALE,
                "lines": lines,
                "date": payment.get("date"),
                "memo": f"Payment attempt {payment['attempt_id']}",
                "source_type": "payment-attempt",
                "source_id": payment["attempt_id"],
            }
        )
    return vouchers_post_many(postings=postings)


def attempt_tax(*, tax_amount: int, transaction_amount: int, paid_before: int, paid_after: int) -> int:
    """The part of a transaction's tax (`tax_amount`, included in `transaction_amount`) that one
    attempt paid, the attempt taking the transaction's paid amount from `paid_before` to
    `paid_after`: the half-up share of the tax at `paid_after` minus the one at `paid_before`, so
    the attempts of a transaction add up to its tax exactly and a single attempt carries all of it."""
    if transaction_amount <= 0:
        return 0

    def share(paid: int) -> int:
        paid = min(max(paid, 0), transaction_amount)
        return (2 * tax_amount * paid + transaction_amount) // (2 * transaction_amount)

    return share(paid_after) - share(paid_before)


def sale_post_from_payment(**payment) -> Voucher:
    """One successful payment (see sales_post_from_payments)."""
    return sales_post_from_payments(payments=[payment])[0]


def cogs_post_many(*, orders: list[Mapping]) -> list[Voucher | None]:
    """Inventory's cost of goods sold per order and cost currency (`merchant_id`, `order_id`,
    `currency`, `amount`): a COGS voucher each, debiting COGS and crediting INVENTORY. Inventory sends
    one event per currency its items are costed in, so an order may have one voucher per currency:
    once per order and currency (source id `<orderId>/<currency>`); None for a cost of 0."""
    for order in orders:
        if order["amount"] == 0:
            log.info("finance.cogs.zero_cost_skipped", merchantId=str(order["merchant_id"]), orderId=order["order_id"])
    costly = [order for order in orders if order["amount"]]
    control = _system_accounts({(o["merchant_id"], o["currency"], role) for o in costly for role in (COGS, INVENTORY)})
    posted = iter(
        vouchers_post_many(
            postings=[
                {
                    "merchant_id": o["merchant_id"],
                    "kind": Kind.COGS,
                    "lines": [
                        {"account_id": control[(o["merchant_id"], o["currency"], COGS)].id, "debit": o["amount"]},
                        {"account_id": control[(o["merchant_id"], o["currency"], INVENTORY)].id, "credit": o["amount"]},
                    ],
                    "date": o.get("date"),
                    "memo": f"Cost of goods sold, order {o['order_id']}",
                    "source_type": "inventory-cogs",
                    "source_id": f"{o['order_id']}/{o['currency']}",
                }
                for o in costly
            ]
        )
    )
    return [next(posted) if order["amount"] else None for order in orders]


def cogs_post(**order) -> Voucher | None:
    """One order's cost of goods sold (see cogs_post_many)."""
    return cogs_post_many(orders=[order])[0]


def inventory_adjustments_post(*, adjustments: list[Mapping]) -> list[Voucher | None]:
    """Inventory's stock adjustments (`merchant_id`, `reference`, `currency`, `value` in signed minor
    units, `reason`): an INVENTORY_ADJUSTMENT voucher each between INVENTORY and
    INVENTORY_ADJUSTMENTS (a gain debits INVENTORY, a loss credits it). Once per reference; None for
    a value of 0."""
    for adjustment in adjustments:
        if adjustment["value"] == 0:
            log.info(
                "finance.inventory_adjustment.zero_value_skipped",
                merchantId=str(adjustment["merchant_id"]),
                reference=adjustment["reference"],
            )
    valued = [a for a in adjustments if a["value"]]
    accounts = _system_accounts({(a["merchant_id"], a["currency"], role) for a in valued for role in (INVENTORY, INVENTORY_ADJUSTMENTS)})
    postings = []
    for a in valued:
        inventory = accounts[(a["merchant_id"], a["currency"], INVENTORY)]
        other = accounts[(a["merchant_id"], a["currency"], INVENTORY_ADJUSTMENTS)]
        debit, credit = (inventory, other) if a["value"] > 0 else (other, inventory)
        reason = a.get("reason") or ""
        postings.append(
            {
                "merchant_id": a["merchant_id"],
                "kind": Kind.INVENTORY_ADJUSTMENT,
                "lines": [{"account_id": debit.id, "debit": abs(a["value"])}, {"account_id": credit.id, "credit": abs(a["value"])}],
                "date": a.get("date"),
                "memo": f"Stock adjustment {a['reference']}" + (f" ({reason})" if reason else ""),
                "source_type": "inventory-adjustment",
                "source_id": a["reference"],
            }
        )
    posted = iter(vouchers_post_many(postings=postings))
    return [next(posted) if a["value"] else None for a in adjustments]


def inventory_adjustment_post(**adjustment) -> Voucher | None:
    """One stock adjustment (see inventory_adjustments_post)."""
    return inventory_adjustments_post(adjustments=[adjustment])[0]
