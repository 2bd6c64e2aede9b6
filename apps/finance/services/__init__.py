"""Every write of the finance service, by aggregate: the chart of accounts (`accounts`), posting
vouchers (`posting`), voids and corrections (`vouchers`) and the postings other services' events ask
for (`event_postings`). Functions take ids and keyword arguments, run in one transaction on
finance's alias and raise the kernel's errors, so the API, the admin and the consumers share the
same rules (docs/services/finance.md). Callers import from this package; it names what they use."""

from apps.finance.services.accounts import DB, DEFAULT_CHART, account_create, account_update, accounts_ensure_defaults
from apps.finance.services.event_postings import (
    ForeignReference,
    attempt_tax,
    cogs_post,
    cogs_post_many,
    cogs_return_post,
    cogs_returns_post,
    inventory_adjustment_post,
    inventory_adjustments_post,
    refund_post,
    refunds_post,
    sale_post_from_payment,
    sales_post_from_payments,
)
from apps.finance.services.posting import MANUAL_KINDS, MAX_LINES, voucher_post, vouchers_post_many
from apps.finance.services.vouchers import voucher_correct, voucher_void

__all__ = [
    "DB",
    "DEFAULT_CHART",
    "MANUAL_KINDS",
    "MAX_LINES",
    "ForeignReference",
    "account_create",
    "account_update",
    "accounts_ensure_defaults",
    "attempt_tax",
    "cogs_post",
    "cogs_post_many",
    "cogs_return_post",
    "cogs_returns_post",
    "inventory_adjustment_post",
    "inventory_adjustments_post",
    "refund_post",
    "refunds_post",
    "sale_post_from_payment",
    "sales_post_from_payments",
    "voucher_correct",
    "voucher_post",
    "voucher_void",
    "vouchers_post_many",
]
