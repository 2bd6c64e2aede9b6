"""Provider IPN confirmation (spec 5): the signed notification (apps/payment/ipn.py) of an attempt's
outcome, answered with the provider's reply codes."""

from __future__ import annotations

import re

from django.db import transaction

from apps.payment import events, ipn
from apps.payment.models import PaymentAttempt
from apps.payment.services.attempts import parse_pay_date, provider_integration, succeed
from apps.payment.services.records import DB, A, locked_transaction, move_attempt
from apps.payment.states import OPEN_ATTEMPT_STATES
from merchant_platform import crypto
from merchant_platform.errors import NotFound
from merchant_platform.logging import get_logger

log = get_logger(__name__)

# IPN replies (VNPay's codes): docs/services/payment.md.
CONFIRMED, NOT_FOUND, ALREADY_CONFIRMED, WRONG_AMOUNT, BAD_SIGNATURE, OTHER = "00", "01", "02", "04", "97", "99"
REPLY_MESSAGES = {
    CONFIRMED: "Confirm Success",
    NOT_FOUND: "Order not found",
    ALREADY_CONFIRMED: "Order already confirmed",
    WRONG_AMOUNT: "Invalid amount",
    BAD_SIGNATURE: "Invalid signature",
    OTHER: "Unknown error",
}
REQUIRED_IPN_FIELDS = ("prov_TxnRef", "prov_Amount", "prov_ResponseCode", "prov_SecureHash")
PAY_DATE = re.compile(r"^\d{14}$")


def ipn_confirm(*, channel: str, fields: dict) -> str:
    """Handle one provider IPN for `channel`; returns the reply code. Never raises for bad input."""
    if not isinstance(fields, dict) or any(
        not isinstance(fields.get(name), str | int) or isinstance(fields.get(name), bool) for name in REQUIRED_IPN_FIELDS
    ):
        log.warning("payment.ipn.malformed", channel=channel)
        return OTHER
    if any(not isinstance(value, str | int) or isinstance(value, bool) for value in fields.values()):
        log.warning("payment.ipn.malformed", channel=channel)
        return OTHER
    code = str(fields["prov_TxnRef"])
    try:
        attempt = PaymentAttempt.objects.using(DB).get(code=code, channel=channel)
    except PaymentAttempt.DoesNotExist:
        log.warning("payment.ipn.unknown_attempt", channel=channel)
        return NOT_FOUND
    try:
        integration = provider_integration(merchant_id=attempt.merchant_id, channel=channel)
    except (NotFound, crypto.DecryptionFailed) as exc:
        log.error("payment.ipn.no_secret", attemptId=str(attempt.id), reason=getattr(exc, "code", "DECRYPT_FAILED"))
        return OTHER
    if not ipn.verify(fields, integration.credential):
        log.warning("payment.ipn.bad_signature", attemptId=str(attempt.id), channel=channel)
        return BAD_SIGNATURE
    amount = str(fields["prov_Amount"])
    if not amount.isdigit() or int(amount) != attempt.amount * 100:
        log.warning("payment.ipn.wrong_amount", attemptId=str(attempt.id))
        return WRONG_AMOUNT
    pay_date = str(fields.get("prov_PayDate") or "")
    if pay_date and (not PAY_DATE.match(pay_date) or parse_pay_date(pay_date) is None):
        log.warning("payment.ipn.bad_pay_date", attemptId=str(attempt.id))
        return OTHER
    success = str(fields["prov_ResponseCode"]) == "00"
    with transaction.atomic(using=DB):
        txn = locked_transaction(attempt.transaction_id)
        attempt = PaymentAttempt.objects.using(DB).select_for_update().get(pk=attempt.id)
        if attempt.status == A.SUCCESS:
            return CONFIRMED if success else ALREADY_CONFIRMED  # the provider's retry: nothing changes
        if attempt.status not in OPEN_ATTEMPT_STATES:
            if success:
                log.error("payment.ipn.late_success", attemptId=str(attempt.id), attemptStatus=attempt.status)
            return ALREADY_CONFIRMED
        reference = str(fields.get("prov_TransactionNo") or "")
        bank_code = str(fields.get("prov_BankCode") or "")
        if success:
            succeed(txn, attempt, reference=reference, bank_code=bank_code, paid_at=parse_pay_date(pay_date))
        else:
            move_attempt(
                attempt,
                "fail",
                provider_reference=reference[:128],
                bank_code=bank_code[:32],
                failure_reason=f"provider response {str(fields['prov_ResponseCode'])[:32]}",
            )
            events.emit(events.ATTEMPT_FAILED, txn=txn, attempt=attempt)
    return CONFIRMED
