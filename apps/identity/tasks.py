"""Celery tasks of identity (queue `identity`, routed by merchant_platform.celery): delivery of
one-time passwords by mail or SMS. The account lookup happens here, after the HTTP response, so an
unknown identifier costs the request exactly what a known one costs."""

from __future__ import annotations

from celery import shared_task

from apps.identity import delivery, identifiers, otp, selectors
from merchant_platform import crypto
from merchant_platform.celery import IDENTITY_MAIL_QUEUE
from merchant_platform.logging import get_logger

log = get_logger(__name__)


@shared_task(
    name=otp.DELIVERY_TASK,
    named_queue=IDENTITY_MAIL_QUEUE,
    autoretry_for=(delivery.TransientDeliveryError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=5,
)
def deliver_one_time_password(namespace: str, kind: str, value: str, sealed_code: str) -> str:
    """Send the code if an account may receive it; the code travels sealed (AES-GCM, bound to the
    namespace and the destination) in the message."""
    try:
        code = otp.unseal(sealed_code, namespace, kind, value)
    except crypto.DecryptionFailed:
        log.error("identity.otp_not_delivered", namespace=namespace, channel=kind, reason="sealed code does not match its destination")
        return "rejected"
    user = selectors.user_for_otp(namespace, kind, value)
    if user is None:
        log.info("identity.otp_not_delivered", namespace=namespace, channel=kind, reason="no eligible account")
        return "skipped"
    try:
        if kind == identifiers.EMAIL:
            delivery.send_mail_code(to=value, namespace=namespace, code=code)
        else:
            delivery.send_sms_code(to=value, namespace=namespace, code=code)
    except delivery.PermanentDeliveryError as exc:
        log.error("identity.otp_delivery_refused", namespace=namespace, channel=kind, userId=str(user.pk), error=str(exc))
        return "refused"
    log.info("identity.otp_delivered", namespace=namespace, channel=kind, userId=str(user.pk))
    return "sent"
