"""Every write of payment, by aggregate: transactions.py (transactions and their attempts opened and
cancelled), attempts.py (attempts at their providers: sending, success and settlement, expiry,
resolution of UNKNOWN attempts), ipn_confirmation.py (the provider's IPN), refunds.py (refunds, their
provider answers and callbacks, the cashier's confirmation, resolution of PENDING ones), webhook_configs.py and
webhook_deliveries.py (outbound webhooks, and the figures the spec's alerts watch); records.py holds
what they share. Functions take ids, lock what they change (the transaction row first, then its
attempts) and emit their events inside the same database transaction (apps/payment/events.py), so
a state change and its events commit together. Callers import this package: it names what they use.
"""

from apps.payment.services.attempts import attempt_resolve, attempt_send, attempts_expire, attempts_resolve_unknown
from apps.payment.services.ipn_confirmation import OTHER, REPLY_MESSAGES, ipn_confirm
from apps.payment.services.records import DB
from apps.payment.services.refunds import (
    refund_callback,
    refund_confirm,
    refund_create,
    refund_fail,
    refund_resolve,
    refund_send,
    refunds_resolve_pending,
)
from apps.payment.services.transactions import Created, attempt_cancel, attempt_create, transaction_cancel, transaction_create
from apps.payment.services.webhook_configs import webhook_create, webhook_delete, webhook_update
from apps.payment.services.webhook_deliveries import (
    DELIVER_TASK,
    pending_queue_length,
    webhook_deliver,
    webhook_deliver_many,
    webhook_deliveries_due,
    webhook_dispatch,
    webhook_error_ratio,
    webhook_redeliver,
    webhook_task_started,
)

__all__ = (
    "DB",
    "DELIVER_TASK",
    "OTHER",
    "REPLY_MESSAGES",
    "Created",
    "attempt_cancel",
    "attempt_create",
    "attempt_resolve",
    "attempt_send",
    "attempts_expire",
    "attempts_resolve_unknown",
    "ipn_confirm",
    "pending_queue_length",
    "refund_callback",
    "refund_confirm",
    "refund_create",
    "refund_fail",
    "refund_resolve",
    "refund_send",
    "refunds_resolve_pending",
    "transaction_cancel",
    "transaction_create",
    "webhook_create",
    "webhook_delete",
    "webhook_deliver",
    "webhook_deliver_many",
    "webhook_deliveries_due",
    "webhook_dispatch",
    "webhook_error_ratio",
    "webhook_redeliver",
    "webhook_task_started",
    "webhook_update",
)
