"""The postings other services' events ask for (spec 6.2): a SALE per successful payment, a REFUND
per succeeded refund, a COGS voucher per order and cost currency, a COGS_RETURN per refund's
restocked goods and cost currency, an INVENTORY_ADJUSTMENT per stock adjustment. Each takes a list
(a consumer's batch) and posts it with vouchers_post_many; the single forms are the same with a list
of one."""

from __future__ import annotations

from collections.abc import Mapping

from apps.finance.models import Account, Voucher
from apps.finance.services.accounts import COGS, INVENTORY, INVENTORY_ADJUSTMENTS, SALES, TAX_PAYABLE, Kind, system_accounts
from apps.finance.services.posting import vouchers_post_many
from merchant_platform.errors import InvalidInput, NotFound
from merchant_platform.logging import get_logger

log = get_logger(__package__)


class ForeignReference(InvalidInput):
    """An event or a request names a record of another merchant than its own: refused, and no retry
    can fix it (a consumer parks the message at once with this reason)."""

    def __init__(self, message: str):
        super().__init__({"merchantId": message})
        self.message = message

    def __str__(self) -> str:
        return self.message


def _chosen_accounts(items: list[Mapping], what: str) -> tuple[list[Account], dict[tuple[int, str, str], Account]]:
    """The account each payment or refund (`finance_account_id`, `merchant_id`, optional `currency`)
    moves money on, and its merchant's system accounts by (merchant, currency, role) for SALES and
    TAX_PAYABLE in the item's currency. The chosen account must be the item's merchant's
    (ForeignReference otherwise); in another currency than the item's, the merchant's account of the
    same system role in that currency stands for it (opened with the chart if needed), and a custom
    account in another currency is refused."""
    accounts = Account.objects.in_bulk({item["finance_account_id"] for item in items})
    chosen: list[tuple[int, str, str] | Account] = []
    for item in items:
        account = accounts.get(item["finance_account_id"])
        if account is None:
            raise NotFound(f"No finance account has the {what}'s financeAccountId.")
        if account.merchant_id != item["merchant_id"]:
            raise ForeignReference(
                f"financeAccountId {account.id} is an account of another merchant than the {what}'s ({item['merchant_id']})."
            )
        currency = item.get("currency") or account.currency
        if currency == account.currency:
            chosen.append(account)
        elif account.system_role:
            chosen.append((account.merchant_id, currency, account.system_role))
        else:
            raise InvalidInput({"currency": f"The finance account is kept in {account.currency}, not {currency}."})
    currencies = {(item["merchant_id"], item.get("currency") or accounts[item["finance_account_id"]].currency) for item in items}
    system = system_accounts(
        {key for key in chosen if isinstance(key, tuple)}
        | {(merchant_id, currency, role) for merchant_id, currency in currencies for role in (SALES, TAX_PAYABLE)}
    )
    return [key if isinstance(key, Account) else system[key] for key in chosen], system


def _check_tax(item: Mapping, what: str) -> None:
    if not 0 <= item.get("tax_amount", 0) <= item["amount"]:
        raise InvalidInput({"taxAmount": f"The tax included in a {what} is from 0 to its amount."})


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
    for payment in payments:
        _check_tax(payment, "payment")
    debited, system = _chosen_accounts(payments, "payment")
    postings = []
    for account, payment in zip(debited, payments, strict=True):
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


def refunds_post(*, refunds: list[Mapping]) -> list[Voucher]:
    """Succeeded refunds (`refund_id`, `transaction_id`, `finance_account_id`, `merchant_id`,
    `amount`, `tax_amount`, `currency`, optional `reason`, `date`): a REFUND voucher each, the SALE
    posting reversed for the refunded amount: credit the finance account the sale was paid into
    with `amount` (the gross paid back), debit the merchant's SALES account in the refund's
    currency with `amount - tax_amount` and its TAX_PAYABLE account with `tax_amount` (the tax no
    longer owed). Accounts are chosen as for a sale (the refund's merchant must own the finance
    account: ForeignReference otherwise; another currency uses the account of the same system
    role in it). Once per refund (source `payment-refund`/the refund id)."""
    for refund in refunds:
        _check_tax(refund, "refund")
    credited, system = _chosen_accounts(refunds, "refund")
    postings = []
    for account, refund in zip(credited, refunds, strict=True):
        tax, net = refund["tax_amount"], refund["amount"] - refund["tax_amount"]
        lines = [{"account_id": system[(account.merchant_id, account.currency, SALES)].id, "debit": net}] if net else []
        if tax:
            lines.append({"account_id": system[(account.merchant_id, account.currency, TAX_PAYABLE)].id, "debit": tax})
        lines.append({"account_id": account.id, "credit": refund["amount"]})
        reason = " ".join((refund.get("reason") or "").split())[:200]
        postings.append(
            {
                "merchant_id": account.merchant_id,
                "kind": Kind.REFUND,
                "lines": lines,
                "date": refund.get("date"),
                "memo": f"Refund {refund['refund_id']} of payment transaction {refund['transaction_id']}"
                + (f": {reason}" if reason else ""),
                "source_type": "payment-refund",
                "source_id": str(refund["refund_id"]),
            }
        )
    return vouchers_post_many(postings=postings)


def refund_post(**refund) -> Voucher:
    """One succeeded refund (see refunds_post)."""
    return refunds_post(refunds=[refund])[0]


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
    control = system_accounts({(o["merchant_id"], o["currency"], role) for o in costly for role in (COGS, INVENTORY)})
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


def cogs_returns_post(*, returns: list[Mapping]) -> list[Voucher | None]:
    """The cost of a refund's restocked goods, per refund and cost currency (`merchant_id`,
    `refund_id`, `order_id`, `currency`, `amount`): a COGS_RETURN voucher each, the order's COGS
    voucher reversed for what came back: debit INVENTORY, credit COGS. Inventory costs a return at
    the unit cost its deduction used, so this takes back exactly the cost that was posted. Once per
    refund and currency (source `inventory-returned`/`<refundId>/<currency>`); None for a cost of 0."""
    for returned in returns:
        if returned["amount"] == 0:
            log.info("finance.cogs_return.zero_cost_skipped", merchantId=str(returned["merchant_id"]), refundId=str(returned["refund_id"]))
    costly = [r for r in returns if r["amount"]]
    control = system_accounts({(r["merchant_id"], r["currency"], role) for r in costly for role in (COGS, INVENTORY)})
    posted = iter(
        vouchers_post_many(
            postings=[
                {
                    "merchant_id": r["merchant_id"],
                    "kind": Kind.COGS_RETURN,
                    "lines": [
                        {"account_id": control[(r["merchant_id"], r["currency"], INVENTORY)].id, "debit": r["amount"]},
                        {"account_id": control[(r["merchant_id"], r["currency"], COGS)].id, "credit": r["amount"]},
                    ],
                    "date": r.get("date"),
                    "memo": f"Cost of goods returned, refund {r['refund_id']} of order {r['order_id']}",
                    "source_type": "inventory-returned",
                    "source_id": f"{r['refund_id']}/{r['currency']}",
                }
                for r in costly
            ]
        )
    )
    return [next(posted) if returned["amount"] else None for returned in returns]


def cogs_return_post(**returned) -> Voucher | None:
    """One refund's returned cost (see cogs_returns_post)."""
    return cogs_returns_post(returns=[returned])[0]


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
    accounts = system_accounts({(a["merchant_id"], a["currency"], role) for a in valued for role in (INVENTORY, INVENTORY_ADJUSTMENTS)})
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
