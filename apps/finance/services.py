"""Every write of the finance service: the chart of accounts, posting vouchers, voids by reversal,
the postings events ask for, and REST idempotency keys. Functions take ids and keyword arguments,
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
from django.utils import timezone

from apps.finance.models import VOIDABLE_KINDS, Account, FinanceTransaction, IdempotencyKey, Voucher
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger

DB = "finance"
log = get_logger(__name__)

MAX_LINES = 500
MAX_AMOUNT = 10**15  # minor units per line: far above any real posting, far below bigint overflow
IDEMPOTENCY_STALE_SECONDS = 60  # a key whose first request died this long ago may be taken over

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
CASH, BANK, RECEIVABLE, INVENTORY, PAYABLE, EQUITY, SALES, COGS, INVENTORY_ADJUSTMENTS, CASH_OVER_SHORT = (
    "CASH",
    "BANK",
    "RECEIVABLE",
    "INVENTORY",
    "PAYABLE",
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
    ("3000", "Owner's equity", Type.EQUITY, EQUITY),
    ("4000", "Sales", Type.INCOME, SALES),
    ("5000", "Cost of goods sold", Type.EXPENSE, COGS),
    ("5100", "Inventory adjustments", Type.EXPENSE, INVENTORY_ADJUSTMENTS),
    ("5900", "Cash over and short", Type.EXPENSE, CASH_OVER_SHORT),
)
CONTROL_ROLES = (INVENTORY, COGS)


# --- Accounts -------------------------------------------------------------------------------------


def accounts_ensure_defaults(*, merchant_id: int, currency: str, created_by: int | None = None) -> list[Account]:
    """The merchant's default chart in `currency`, with the control accounts INVENTORY and COGS
    (from the MERCHANT change stream). Idempotent: an account that exists (by code) is kept as it
    is, so replays and snapshots change nothing; concurrent calls insert each account once."""
    rows = [
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
    with transaction.atomic(using=DB):
        Account.objects.using(DB).bulk_create(rows, ignore_conflicts=True)
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


def _amount(field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AMOUNT:
        raise InvalidInput({field: f"Give a whole number of minor units from 0 to {MAX_AMOUNT} (a JSON integer)."})
    return value


def _lines(raw: Iterable[Mapping]) -> list[Line]:
    raw = list(raw)
    if len(raw) < 2:
        raise InvalidInput({"lines": "A voucher has at least two lines."})
    if len(raw) > MAX_LINES:
        raise InvalidInput({"lines": f"A voucher has at most {MAX_LINES} lines."})
    lines = []
    for index, item in enumerate(raw):
        debit = _amount(f"lines[{index}].debit", item.get("debit", 0))
        credit = _amount(f"lines[{index}].credit", item.get("credit", 0))
        if (debit > 0) == (credit > 0):
            raise InvalidInput({f"lines[{index}]": "Give a debit or a credit above zero, not both."})
        account_id = item.get("account_id")
        if isinstance(account_id, bool) or not isinstance(account_id, int):
            raise InvalidInput({f"lines[{index}].accountId": "Give an account id."})
        lines.append(Line(account_id=account_id, debit=debit, credit=credit, currency=item.get("currency")))
    return lines


def _check_balanced(lines: list[Line], accounts: dict[int, Account]) -> None:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for index, line in enumerate(lines):
        account = accounts.get(line.account_id)
        if account is None:
            raise InvalidInput({f"lines[{index}].accountId": "No account of this merchant has this id."})
        if line.currency is not None and line.currency != account.currency:
            raise InvalidInput({f"lines[{index}].currency": f"The account is kept in {account.currency}, not {line.currency}."})
        totals[account.currency][0] += line.debit
        totals[account.currency][1] += line.credit
    unbalanced = [f"{currency}: debits {d}, credits {c}" for currency, (d, c) in sorted(totals.items()) if d != c]
    if unbalanced:
        raise InvalidInput({"lines": f"The voucher does not balance per currency ({'; '.join(unbalanced)})."})


def _next_number(merchant_id: int, year: int) -> int:
    """The next voucher number of the merchant and year. The counter row stays locked until the
    posting commits (or rolls back, giving the number back), so numbers have no gap."""
    with connections[DB].cursor() as cursor:
        cursor.execute(
            "INSERT INTO finance_voucher_counter (merchant_id, fiscal_year, last_number) VALUES (%s, %s, 1) "
            "ON CONFLICT (merchant_id, fiscal_year) DO UPDATE SET last_number = finance_voucher_counter.last_number + 1 "
            "RETURNING last_number",
            [merchant_id, year],
        )
        return cursor.fetchone()[0]


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
    idempotency_key_id: int | None = None,
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
                idempotency_key_id=idempotency_key_id,
            )
    except IntegrityError:
        # Two deliveries of one source raced; the other committed first.
        existing = _replay(merchant_id, source_type, source_id) if source_id else None
        if existing is None:
            raise
        return existing


def _post(*, merchant_id, kind, lines, date, memo, reason, source_type, source_id, reverses_id, created_by, idempotency_key_id) -> Voucher:
    ids = sorted({line.account_id for line in lines})
    accounts = {a.id: a for a in Account.objects.select_for_update().filter(pk__in=ids, merchant_id=merchant_id).order_by("pk")}
    _check_balanced(lines, accounts)
    number = _next_number(merchant_id, date.year)
    voucher = Voucher(
        merchant_id=merchant_id,
        fiscal_year=date.year,
        number=number,
        voucher_number=f"{date.year}-{number:06d}",
        kind=kind,
        reason=reason,
        date=date,
        memo=memo,
        source_type=source_type,
        source_id=source_id,
        reverses_id=reverses_id,
        created_by=created_by,
    )
    voucher.save(using=DB, force_insert=True)
    before = {account_id: account.balance for account_id, account in accounts.items()}
    rows = []
    for number_in_voucher, line in enumerate(lines, start=1):
        account = accounts[line.account_id]
        movement = line.debit - line.credit
        account.balance += movement if account.normal_side == Side.DEBIT else -movement
        account.posting_sequence += 1
        rows.append(
            FinanceTransaction(
                voucher=voucher,
                line_number=number_in_voucher,
                merchant_id=merchant_id,
                account=account,
                currency=account.currency,
                debit=line.debit,
                credit=line.credit,
                posting_sequence=account.posting_sequence,
                balance_after=account.balance,
                date=date,
            )
        )
    FinanceTransaction.objects.using(DB).bulk_create(rows)
    now = timezone.now()
    for account in accounts.values():
        account.updated_at = now
    Account.objects.using(DB).bulk_update(accounts.values(), ["balance", "posting_sequence", "updated_at"])
    if idempotency_key_id is not None:
        IdempotencyKey.objects.using(DB).filter(pk=idempotency_key_id).update(voucher_id=voucher.id)
    negative = [a for a in accounts.values() if a.balance < 0 and a.balance < before[a.id]]
    for account in negative:
        transaction.on_commit(
            lambda account=account: log.warning(
                "finance.account.went_negative",
                accountId=str(account.id),
                merchantId=str(account.merchant_id),
                code=account.code,
                currency=account.currency,
                balance=account.balance,
                voucherId=str(voucher.id),
            ),
            using=DB,
        )
    voucher.posted_lines = rows
    return voucher


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


# --- Postings from events (spec 6.2) --------------------------------------------------------------


def sale_post_from_payment(
    *, finance_account_id: int, amount: int, attempt_id: str, currency: str | None = None, date: datetime.date | None = None
) -> Voucher:
    """A successful payment: a SALE voucher debiting the finance account the sale side chose and
    crediting the merchant's SALES account in its currency. Once per payment attempt."""
    account = Account.objects.filter(pk=finance_account_id).first()
    if account is None:
        raise NotFound("No finance account has the payment's financeAccountId.")
    if currency is not None and currency != account.currency:
        raise InvalidInput({"currency": f"The finance account is kept in {account.currency}, not {currency}."})
    sales = control_account(merchant_id=account.merchant_id, currency=account.currency, role=SALES)
    return voucher_post(
        merchant_id=account.merchant_id,
        kind=Kind.SALE,
        lines=[{"account_id": account.id, "debit": amount}, {"account_id": sales.id, "credit": amount}],
        date=date,
        memo=f"Payment attempt {attempt_id}",
        source_type="payment-attempt",
        source_id=attempt_id,
    )


def cogs_post(*, merchant_id: int, order_id: str, currency: str, amount: int, date: datetime.date | None = None) -> Voucher | None:
    """Inventory's cost of goods sold for an order: a COGS voucher debiting COGS and crediting
    INVENTORY. Once per order; nothing for a cost of zero."""
    if amount == 0:
        log.info("finance.cogs.zero_cost_skipped", merchantId=str(merchant_id), orderId=order_id)
        return None
    cogs = control_account(merchant_id=merchant_id, currency=currency, role=COGS)
    inventory = control_account(merchant_id=merchant_id, currency=currency, role=INVENTORY)
    return voucher_post(
        merchant_id=merchant_id,
        kind=Kind.COGS,
        lines=[{"account_id": cogs.id, "debit": amount}, {"account_id": inventory.id, "credit": amount}],
        date=date,
        memo=f"Cost of goods sold, order {order_id}",
        source_type="inventory-cogs",
        source_id=order_id,
    )


def inventory_adjustment_post(
    *, merchant_id: int, reference: str, currency: str, value: int, reason: str = "", date: datetime.date | None = None
) -> Voucher | None:
    """Inventory's stock adjustment worth `value` (signed minor units): an INVENTORY_ADJUSTMENT
    voucher between INVENTORY and INVENTORY_ADJUSTMENTS (a gain debits INVENTORY, a loss credits
    it). Once per reference; nothing for a value of zero."""
    if value == 0:
        log.info("finance.inventory_adjustment.zero_value_skipped", merchantId=str(merchant_id), reference=reference)
        return None
    inventory = control_account(merchant_id=merchant_id, currency=currency, role=INVENTORY)
    adjustments = control_account(merchant_id=merchant_id, currency=currency, role=INVENTORY_ADJUSTMENTS)
    debit, credit = (inventory, adjustments) if value > 0 else (adjustments, inventory)
    return voucher_post(
        merchant_id=merchant_id,
        kind=Kind.INVENTORY_ADJUSTMENT,
        lines=[{"account_id": debit.id, "debit": abs(value)}, {"account_id": credit.id, "credit": abs(value)}],
        date=date,
        memo=f"Stock adjustment {reference}" + (f" ({reason})" if reason else ""),
        source_type="inventory-adjustment",
        source_id=reference,
    )


# --- REST idempotency keys (ARCHITECTURE.md section 10) -------------------------------------------


def idempotency_begin(*, caller: str, key: str, request_hash: str) -> tuple[int, int | None]:
    """Claim `key` for this caller: (record id, None) for a first request (or one whose first try
    died), (record id, voucher id) to replay. 409 IDEMPOTENCY_KEY_IN_PROGRESS while the first
    request runs; 422 IDEMPOTENCY_KEY_REUSED for the same key with another request."""
    now = timezone.now()
    with transaction.atomic(using=DB):
        record, created = IdempotencyKey.objects.using(DB).get_or_create(
            caller=caller, key=key, defaults={"request_hash": request_hash, "started_at": now}
        )
        if created:
            return record.id, None
        record = IdempotencyKey.objects.using(DB).select_for_update().get(pk=record.pk)
        if record.request_hash != request_hash:
            raise ApiError("This Idempotency-Key was used with another request.", code="IDEMPOTENCY_KEY_REUSED", status_code=422)
        if record.voucher_id is not None:
            return record.id, record.voucher_id
        if (now - record.started_at).total_seconds() < IDEMPOTENCY_STALE_SECONDS:
            raise Conflict("A request with this Idempotency-Key is still running.", code="IDEMPOTENCY_KEY_IN_PROGRESS")
        record.started_at = now
        record.save(using=DB, update_fields=["started_at"])
        return record.id, None


def idempotency_release(*, record_id: int) -> None:
    """Forget a key whose request failed without posting, so the caller may send it again."""
    IdempotencyKey.objects.using(DB).filter(pk=record_id, voucher_id__isnull=True).delete()
