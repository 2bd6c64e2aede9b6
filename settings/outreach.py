"""Outreach: subscription mail, double opt-in and the optional Prometheus endpoint
(docs/services/outreach.md)."""

from settings.env import env

# New subscribers confirm through a mailed link before they count as ACTIVE (Listmonk's double opt-in).
OUTREACH_DOUBLE_OPT_IN = env.bool("OUTREACH_DOUBLE_OPT_IN", default=True)
# Public web pages that carry the token back to the API (confirm / unsubscribe buttons): {token} is filled in.
OUTREACH_CONFIRM_URL = env.str("OUTREACH_CONFIRM_URL", default="http://127.0.0.1:8000/newsletter/confirm?token={token}")
OUTREACH_UNSUBSCRIBE_URL = env.str("OUTREACH_UNSUBSCRIBE_URL", default="http://127.0.0.1:8000/newsletter/unsubscribe?token={token}")
# The RFC 8058 one-click target (List-Unsubscribe header): the public API's unsubscribe endpoint.
OUTREACH_ONE_CLICK_URL = env.str(
    "OUTREACH_ONE_CLICK_URL", default="http://127.0.0.1:8000/v1/api/outreach/subscribers/unsubscribe?token={token}"
)
# Subscription mail goes through the platform's SMTP settings (EMAIL_URL, EMAIL_TIMEOUT in settings/auth.py);
# the sender address defaults to DEFAULT_FROM_EMAIL.
OUTREACH_MAIL_FROM = env.str("OUTREACH_MAIL_FROM", default="")
# At most one token-carrying message per address in this window, however often it is subscribed.
OUTREACH_MAIL_COOLDOWN_SECONDS = env.int("OUTREACH_MAIL_COOLDOWN_SECONDS", default=600)
# Messages waiting for the in-process sender; past this, new ones are dropped and logged.
OUTREACH_MAIL_BACKLOG = env.int("OUTREACH_MAIL_BACKLOG", default=200)
OUTREACH_METRICS_ENABLED = env.bool("OUTREACH_METRICS_ENABLED", default=False)

# OpenAPI overrides of outreach, merged into SPECTACULAR_SETTINGS only where outreach is active
# (settings/__init__.py): name its enums (drf-spectacular would otherwise suffix a hash to tell the
# two `status` enums apart).
OUTREACH_OPENAPI_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        "InquiryStatusEnum": "apps.outreach.models.Inquiry.Status",
        "SubscriberStatusEnum": "apps.outreach.models.Subscriber.Status",
        "OneClickEnum": ["One-Click"],
    }
}
