"""Secrets and service-to-service credentials."""

from merchant_platform.registry import active_services
from settings.env import IS_LOCAL, env, secret

# AES-256-GCM key material for credentials at rest; identical on every process of a service.
# Required in production unless every service of the process can do without it (licensing: spec 7).
# Development and test make their own (settings.development).
if any(service.application_secret_required for service in active_services()) or IS_LOCAL:
    APP_ENV_APPLICATION_SECRET = secret("APP_ENV_APPLICATION_SECRET")
else:
    APP_ENV_APPLICATION_SECRET = env.str("APP_ENV_APPLICATION_SECRET", default="")

# HTTP Basic for service-to-service calls (docs/authentication.md, "Service accounts"): each calling
# service has its own account, named after it, and may call only the routes and actions listed for
# it below (anything else is 403 SERVICE_ACCOUNT_FORBIDDEN). A process accepts the accounts of
# SERVICE_BASIC_AUTH_ACCOUNTS and presents, for a call made by service S, the account S with its
# password from SERVICE_BASIC_AUTH_CREDENTIALS (by default the same map). Each password is
# SERVICE_BASIC_AUTH_PASSWORD_<ACCOUNT> (development makes them at random, test pins them in
# settings.test), or give the maps whole: "commerce=...,ledger=...,taxation=...".
SERVICE_ACCOUNT_PERMISSIONS = {
    # The sale-order saga: stock reservations, tax quotes, payment transactions and the webhook
    # subscription that brings their events back; a product's tax group and an order's finance
    # account named by a user: commerce checks they are the merchant's.
    "commerce": (
        "inventory.Reservation.create",
        "inventory.Reservation.release",
        # Refunds (issue 33): a restocked return's location is checked with inventory; a webhook
        # subscription made before refunds is changed to ask for their events (read: to find it).
        "inventory.Location.read",
        "payment.Webhook.read",
        "payment.Webhook.update",
        "taxation.Quote.create",
        "taxation.TaxGroup.read",
        "finance.Account.read",
        "payment.Transaction.read",
        "payment.Transaction.create",
        "payment.Transaction.cancel",
        "payment.Webhook.create",
        # A sale order's refund (issue 33): the return asks payment to give the money back.
        "payment.Refund.read",
        "payment.Refund.create",
    ),
    # A user's payment transaction naming a finance account: payment checks it is the merchant's.
    # Every account below reads commerce's merchants: its admin shows merchant ids with their names.
    "payment": ("finance.Account.read", "commerce.Merchant.read"),
    # Ledger documents read finance's general-ledger export; an account statement's account is
    # checked with finance when the job is made.
    "ledger": ("finance.GeneralLedger.read", "finance.Account.read", "commerce.Merchant.read"),
    # `manage.py resync_tax` reads commerce's products.
    "taxation": ("commerce.Product.read", "commerce.Merchant.read"),
    "finance": ("commerce.Merchant.read",),
    "inventory": ("commerce.Merchant.read",),
    "licensing": ("commerce.Merchant.read",),
    "outreach": ("commerce.Merchant.read",),
}
SERVICE_BASIC_AUTH_ACCOUNTS = env.dict("SERVICE_BASIC_AUTH_ACCOUNTS", default={}) or {
    account: secret(f"SERVICE_BASIC_AUTH_PASSWORD_{account.upper()}") for account in SERVICE_ACCOUNT_PERMISSIONS
}
SERVICE_BASIC_AUTH_CREDENTIALS = env.dict("SERVICE_BASIC_AUTH_CREDENTIALS", default={}) or dict(SERVICE_BASIC_AUTH_ACCOUNTS)
# The account presented by code outside every service (an operator's script); none by default.
SERVICE_BASIC_AUTH_USER = env.str("SERVICE_BASIC_AUTH_USER", default="")

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# TLS ends at the edge (spec 1.2): trust the gateway's forwarded scheme.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
