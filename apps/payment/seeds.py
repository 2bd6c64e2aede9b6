"""Seeds of payment (idempotent, re-run by RUN_MODE=migrate): the baseline permissions of the roles on
payment's resources. A merchant's OWNER runs its payments and webhooks; an EMPLOYEE reads them and
opens and cancels transactions; a CASHIER opens transactions and reads them."""

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
    ],
    "EMPLOYEE": ["payment.Transaction.read", "payment.Transaction.create", "payment.Transaction.cancel", "payment.Attempt.read"],
    "CASHIER": ["payment.Transaction.read", "payment.Transaction.create", "payment.Attempt.read"],
}


def run() -> dict[str, int]:
    return policy_seed_role_permissions(source="payment", baseline=BASELINE)
