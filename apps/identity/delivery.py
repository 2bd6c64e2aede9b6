"""Delivery of one-time passwords: mail over SMTP, SMS through a provider adapter.

Mail uses Django's SMTP backend with the EMAIL_URL settings (explicitly, so tests reach a real SMTP
server). SMS goes through `sms_provider()`: `HttpSmsProvider` (a JSON HTTP API: POST SMS_HTTP_URL
with `{"from", "to", "text"}` and `Authorization: Bearer SMS_HTTP_TOKEN`; any 2xx is accepted) or
`ConsoleSmsProvider` (development only: prints the message on stdout). Without EMAIL_URL or
SMS_PROVIDER the matching flows answer 503 MAIL_NOT_CONFIGURED / SMS_NOT_CONFIGURED.
"""

from __future__ import annotations

import sys

import requests
from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from merchant_platform import http
from merchant_platform.errors import ServiceUnavailable

PURPOSES = {
    "verify-email": "verify your email address",
    "phone-auth": "sign in",
    "forgot-password": "reset your password",
}


class MailNotConfigured(ServiceUnavailable):
    default_code = "MAIL_NOT_CONFIGURED"
    default_detail = "Mail delivery is not configured on this platform (EMAIL_URL), so codes cannot be sent by email."


class SmsNotConfigured(ServiceUnavailable):
    default_code = "SMS_NOT_CONFIGURED"
    default_detail = "SMS delivery is not configured on this platform (SMS_PROVIDER), so codes cannot be sent by SMS."


class TransientDeliveryError(RuntimeError):
    """Worth retrying: the provider or the SMTP server did not answer, or answered 5xx."""


class PermanentDeliveryError(RuntimeError):
    """Not worth retrying: the provider refused the message."""


def message_text(namespace: str, code: str) -> str:
    minutes = max(settings.IDENTITY_OTP_TTL_SECONDS // 60, 1)
    return f"Your Merchant Platform code to {PURPOSES[namespace]} is {code}. It expires in {minutes} minutes."


def ensure_mail_configured() -> None:
    if not settings.IDENTITY_MAIL_ENABLED:
        raise MailNotConfigured()


def ensure_sms_configured() -> None:
    if settings.SMS_PROVIDER not in ("http", "console") or (settings.SMS_PROVIDER == "http" and not settings.SMS_HTTP_URL):
        raise SmsNotConfigured()


def send_mail_code(*, to: str, namespace: str, code: str) -> None:
    connection = get_connection(
        "django.core.mail.backends.smtp.EmailBackend",
        host=settings.EMAIL_HOST,
        port=settings.EMAIL_PORT,
        username=settings.EMAIL_HOST_USER or None,
        password=settings.EMAIL_HOST_PASSWORD or None,
        use_tls=settings.EMAIL_USE_TLS,
        use_ssl=settings.EMAIL_USE_SSL,
        timeout=settings.EMAIL_TIMEOUT,
    )
    message = EmailMessage(
        subject=f"Your code to {PURPOSES[namespace]}",
        body=message_text(namespace, code),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[to],
        connection=connection,
    )
    try:
        message.send()
    except OSError as exc:  # smtplib's errors are OSErrors; a refused recipient is one too
        raise TransientDeliveryError(f"SMTP delivery failed: {type(exc).__name__}") from None


class HttpSmsProvider:
    name = "http"

    def send(self, *, to: str, text: str) -> None:
        try:
            response = http.session(retries=0).post(
                settings.SMS_HTTP_URL,
                json={"from": settings.SMS_SENDER, "to": to, "text": text},
                headers={"Authorization": f"Bearer {settings.SMS_HTTP_TOKEN}"} if settings.SMS_HTTP_TOKEN else {},
                timeout=(3.05, 10),
            )
        except requests.RequestException as exc:
            raise TransientDeliveryError(f"SMS provider unreachable: {type(exc).__name__}") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise TransientDeliveryError(f"SMS provider answered {response.status_code}")
        if response.status_code >= 400:
            raise PermanentDeliveryError(f"SMS provider refused the message: {response.status_code}")


class ConsoleSmsProvider:
    """Development only (refused when APP_ENV=production): the message on stdout."""

    name = "console"

    def send(self, *, to: str, text: str) -> None:
        sys.stdout.write(f"[sms to {to}] {text}\n")
        sys.stdout.flush()


def sms_provider() -> HttpSmsProvider | ConsoleSmsProvider:
    ensure_sms_configured()
    return ConsoleSmsProvider() if settings.SMS_PROVIDER == "console" else HttpSmsProvider()


def send_sms_code(*, to: str, namespace: str, code: str) -> None:
    sms_provider().send(to=to, text=message_text(namespace, code))
