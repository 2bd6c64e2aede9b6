"""Who may join which room of /stream (docs/services/signal.md, "Rooms"). The spec accepts every
room "for now" (spec 5); signal does not: a room is joined only by a rule below, anything else is
refused.

| room | who may join |
|---|---|
| `user.<userId>` | that user only (its notifications arrive there) |
| `merchant.<merchantId>.payment[.*]` | `read` on `payment.Webhook` there (the payment event feed, as webhooks carry it) |
| `merchant.<merchantId>.ledger[.*]` | `read` on `ledger.LedgerJob` in that merchant (job statuses) |
| `merchant.<merchantId>.commerce[.*]` | `read` on `commerce.SaleOrder` in that merchant (sale order moves) |
| `merchant.<merchantId>.finance[.*]` | `read` on `finance.Voucher` in that merchant (vouchers posted and voided) |
| `merchant.<merchantId>` and its other rooms | a global administrator, or a member of that merchant (notification rooms) |
| `outreach.inquiries` | holders of `outreach.Inquiry.read` everywhere (outreach's platform observation room) |
| `outreach.inquiries.merchant.<merchantId>` | holders of `outreach.Inquiry.read` in that merchant |
"""

from __future__ import annotations

import re

from merchant_platform.policy import can, principal_grants

_USER = re.compile(r"^user\.([1-9][0-9]{0,18})$")
_MERCHANT = re.compile(r"^merchant\.([1-9][0-9]{0,18})(?:\.([A-Za-z0-9_:-]+)(?:\.[A-Za-z0-9._:-]+)?)?$")
_OUTREACH_MERCHANT = re.compile(r"^outreach\.inquiries\.merchant\.([1-9][0-9]{0,18})$")
OUTREACH_ROOM = "outreach.inquiries"
OUTREACH_RESOURCE = "outreach.Inquiry"
# The kind of a merchant room (its first segment after the merchant id) -> the policy resource its
# messages carry; joining needs `read` on it in that merchant, as reading the records over REST does.
MERCHANT_ROOM_RESOURCES = {
    "payment": "payment.Webhook",
    "ledger": "ledger.LedgerJob",
    "commerce": "commerce.SaleOrder",
    "finance": "finance.Voucher",
}


def may_join(user, room: str) -> bool:
    """May this token user (merchant_platform.verification.tokens.TokenUser) receive the room's messages?
    Reads the policy store (cached in Redis): call it from a thread, not the event loop."""
    if match := _USER.match(room):
        return int(match.group(1)) == int(user.id)
    if match := _MERCHANT.match(room):
        merchant, kind = match.group(1), match.group(2)
        if kind in MERCHANT_ROOM_RESOURCES:
            return can(user, MERCHANT_ROOM_RESOURCES[kind], "read", domain=merchant)
        grants = principal_grants(user)
        return grants.is_admin or merchant in grants.domains
    if room == OUTREACH_ROOM:
        return can(user, OUTREACH_RESOURCE, "read")
    if match := _OUTREACH_MERCHANT.match(room):
        return can(user, OUTREACH_RESOURCE, "read", domain=match.group(1))
    return False
