"""Every write of sale orders, by aggregate: drafts.py (creation and edits, lines priced from the
catalog), placing.py (the placing saga across inventory, taxation and payment), payment_webhooks.py
(payment's webhooks in), subscriptions.py (the merchant's webhook subscription at payment),
settlement.py (a settlement matched to its order, and the moves it makes: paid, closed unpaid, stock
released), closing.py (cancelling, fulfilling, expiring), refunds.py (returns of paid orders and
their refunds at payment); records.py holds what they share. Functions take ids and keyword arguments
and raise the kernel's errors (docs/services/commerce.md, "Sale orders"). Callers import this
package: it names what they use."""

from apps.commerce.sales.services.closing import order_cancel, order_expire_if_unpaid, order_fulfill, orders_expire_due
from apps.commerce.sales.services.drafts import finance_account_check, order_create, order_update
from apps.commerce.sales.services.payment_webhooks import webhook_apply, webhook_verify
from apps.commerce.sales.services.placing import order_place
from apps.commerce.sales.services.records import CHANNELS, DB, SECRET_PURPOSE
from apps.commerce.sales.services.refunds import order_refund, refund_locations_check, return_submit, returns_resume
from apps.commerce.sales.services.subscriptions import subscription_ensure, subscription_follow_refunds

__all__ = (
    "CHANNELS",
    "DB",
    "SECRET_PURPOSE",
    "finance_account_check",
    "order_cancel",
    "order_create",
    "order_expire_if_unpaid",
    "order_fulfill",
    "order_place",
    "order_refund",
    "order_update",
    "orders_expire_due",
    "refund_locations_check",
    "return_submit",
    "returns_resume",
    "subscription_ensure",
    "subscription_follow_refunds",
    "webhook_apply",
    "webhook_verify",
)
