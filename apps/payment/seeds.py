"""Seeds of payment (idempotent, re-run by RUN_MODE=migrate): the baseline permissions of the roles on
payment's resources. A merchant's OWNER runs its payments, refunds and webhooks; an EMPLOYEE reads them,
opens and cancels transactions and refunds them; a CASHIER opens transactions, reads them and
confirms the cash refunds it pays out."""

from merchant_platform.policy import policy_seed_role_permissions

BASELINE = {
    "OWNER": [
        "payment.Transaction.read",
        "payment.Transaction.create",
        "payment.Transaction.cancel",
        "payment.Attempt.read",
        "payment.Attempt.cancel",
        "payment.Webhook.read",
        "payment.Webhook.create",
        "payment.Webhook.update",
        "payment.Webhook.delete",
        "payment.Webhook.redeliver",
        "payment.Refund.read",
        "payment.Refund.create",
        "payment.Refund.confirm",
        "payment.Refund.fail",
    ],
    "EMPLOYEE": [
        "payment.Transaction.read",
        "payment.Transaction.create",
        "payment.Transaction.cancel",
        "payment.Attempt.read",
        "payment.Refund.read",
        "payment.Refund.create",
        "payment.Refund.confirm",
        "payment.Refund.fail",
    ],
    # The till pays a SYSTEM refund's cash out: a cashier confirms (or fails) it, and reads refunds.
    "CASHIER": [
        "payment.Transaction.read",
        "payment.Transaction.create",
        "payment.Attempt.read",
        "payment.Refund.read",
        "payment.Refund.confirm",
        "payment.Refund.fail",
    ],
}


def run() -> dict[str, int]:
    return policy_seed_role_permissions(source="payment", baseline=BASELINE)
