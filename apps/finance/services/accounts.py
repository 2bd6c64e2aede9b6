"""A merchant's chart of accounts: the default chart per currency (made from the MERCHANT change
stream, or completed on a merchant's first system posting in a new currency), the accounts a person
adds or renames, and the system accounts the platform posts to by itself."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import IntegrityError, transaction

from apps.finance.models import Account, Voucher
from merchant_platform.errors import Conflict, NotFound
from merchant_platform.logging import get_logger

DB = "finance"
log = get_logger(__package__)  # every module of the package logs as apps.finance.services

Kind, Side, Type = Voucher.Kind, Account.Side, Account.Type
NORMAL_SIDE = {
    Type.ASSET: Side.DEBIT,
    Type.EXPENSE: Side.DEBIT,
    Type.LIABILITY: Side.CREDIT,
    Type.EQUITY: Side.CREDIT,
    Type.INCOME: Side.CREDIT,
}
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


def system_accounts(wanted: set[tuple[int, str, str]]) -> dict[tuple[int, str, str], Account]:
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
