"""Provider connectors (Hyperswitch's connector abstraction): one interface, one connector per
channel. A connector creates a payment at the provider and asks it where a payment stands; the IPN
is verified by the same rule for every channel (apps/payment/ipn.py).

The provider protocol (the fake provider, apps/payment/fake_provider.py, speaks it):
  POST {endpoint}/payments  {"txnRef", "amount" (x100), "currency", "channel", "ipnUrl", "expiresAt"}
       header X-Signature: upper-case hex HMAC-SHA512 of the body under the merchant's secret
       201 {"transactionNo", "qrPayload"}
  GET  {endpoint}/payments/{txnRef}  (same signature over the path)
       200 {"status": "PENDING" | "PAID" | "FAILED", "transactionNo", "bankCode", "payDate"}; 404 unknown
  POST {endpoint}/refunds  {"refundRef", "txnRef", "transactionNo", "amount" (x100), "currency", "channel",
       "reason", "callbackUrl"}  (signed as above; VNPay's refund call)
       200 {"status": "SUCCEEDED" | "FAILED", "refundNo", "reason"}: answered at once
       202 {"status": "PENDING", "refundNo"}: accepted; the outcome comes as a signed callback to
           callbackUrl (fields prov_RefundRef, prov_TxnRef, prov_RefundNo, prov_Amount (x100),
           prov_ResponseCode "00" or another, prov_SecureHash signed as the IPN), retried until
           acknowledged with RspCode 00 or 02
  GET  {endpoint}/refunds/{refundRef}  (signed over the path; VNPay's querydr)
       200 {"status": "PENDING" | "SUCCEEDED" | "FAILED", "refundNo", "reason"}; 404 unknown

A merchant's endpoint (`settings.endpoint`) and secret (the credential) come from its integration
whose code is the channel name (QR, PHONE_POS, SMART_POS, SYSTEM), read through the kernel. The
endpoint is the merchant's URL: every call goes through the kernel's outbound client (public
addresses only, resolved once and connected to as checked, no redirects, no proxy), except the
development integration's, which the platform's settings name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass

import requests
from django.conf import settings
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from merchant_platform import outbound
from merchant_platform.integrations import MerchantIntegration

SENT, FAILED, UNKNOWN, PENDING, PAID = "SENT", "FAILED", "UNKNOWN", "PENDING", "PAID"
SUCCEEDED = "SUCCEEDED"  # a refund's outcome (with FAILED, PENDING and UNKNOWN)
REFUND_NOT_FOUND = "provider does not know the refund"  # the reason of query_refund's FAILED on a 404
REFUND_CALLBACK_PATH = "/api/pay/provider/refund/ipn"
# The id of the development integration (PAYMENT_DEVELOPMENT_PROVIDER): no stored row, its endpoint
# comes from settings, not from a merchant.
DEVELOPMENT_INTEGRATION_ID = 0


def allow_private(integration: MerchantIntegration) -> bool:
    """Whether the integration's endpoint may be on a private address: the development integration,
    or the development switch that lifts the rule for every merchant URL."""
    return integration.id == DEVELOPMENT_INTEGRATION_ID or settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS


@dataclass(frozen=True)
class ProviderAnswer:
    # SENT / FAILED / UNKNOWN (create); PENDING / PAID / FAILED / UNKNOWN (query);
    # SUCCEEDED / FAILED / PENDING (accepted, or waiting) / UNKNOWN (a refund, asked or queried)
    status: str
    reference: str = ""
    qr_payload: str = ""
    bank_code: str = ""
    pay_date: str = ""
    reason: str = ""


def signature(body: bytes, secret: str) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha512).hexdigest().upper()


def never_sent(exc: requests.RequestException) -> bool:
    """Whether the request failed before reaching the provider (no connection was made)."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, NewConnectionError | ConnectTimeoutError)


class Connector(ABC):
    channel: str
    ipn_path: str

    @abstractmethod
    def create_payment(self, *, integration: MerchantIntegration, code: str, amount: int, currency: str, expires_at) -> ProviderAnswer:
        """Ask the provider to collect `amount`; UNKNOWN when it may or may not have taken the request."""

    @abstractmethod
    def query_payment(self, *, integration: MerchantIntegration, code: str) -> ProviderAnswer:
        """Where the provider says the payment `code` stands."""

    @abstractmethod
    def refund(
        self,
        *,
        integration: MerchantIntegration,
        code: str,
        payment_code: str,
        payment_reference: str,
        amount: int,
        currency: str,
        reason: str,
    ) -> ProviderAnswer:
        """Ask the provider to give `amount` of the payment `payment_code` back under the refund
        reference `code`: SUCCEEDED or FAILED when it answers at once, PENDING when it accepted and
        calls back, UNKNOWN when it may or may not have taken the request."""

    @abstractmethod
    def query_refund(self, *, integration: MerchantIntegration, code: str) -> ProviderAnswer:
        """Where the provider says the refund `code` stands (FAILED when it never heard of it)."""


class HttpConnector(Connector):
    def __init__(self, channel: str, ipn_path: str):
        self.channel = channel
        self.ipn_path = ipn_path

    def _endpoint(self, integration: MerchantIntegration) -> str:
        endpoint = str(integration.settings.get("endpoint") or "")
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError("the integration has no http(s) endpoint")
        return endpoint.rstrip("/")

    def _call(self, integration: MerchantIntegration, method: str, url: str, *, retries: int, **kwargs) -> requests.Response:
        """One request to the merchant's provider; RefusedUrl (nothing sent) when the guard refuses it."""
        with outbound.new_session(retries=retries) as session:
            return outbound.request(session, method, url, allow_private=allow_private(integration), timeout=self._timeout(), **kwargs)

    def _timeout(self):
        return (3.05, settings.PAYMENT_PROVIDER_TIMEOUT_SECONDS)

    def _post(self, integration: MerchantIntegration, path: str, payload: dict, *, accepted: tuple[int, ...]):
        """POST a signed JSON body that asks the provider to move money: its response when the status
        is one of `accepted`, else the ProviderAnswer it comes to (FAILED only when nothing moved)."""
        try:
            url = self._endpoint(integration) + path
        except ValueError as exc:
            return ProviderAnswer(FAILED, reason=str(exc))
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "X-Signature": signature(body, integration.credential)}
        try:
            response = self._call(integration, "POST", url, retries=0, data=body, headers=headers)
        except outbound.RefusedUrl as exc:
            return ProviderAnswer(FAILED, reason=f"provider endpoint refused: {exc}")
        except requests.RequestException as exc:
            # Only a request that never left may fail; once sent, the provider may have taken it (a
            # read timeout, a connection lost mid-answer): UNKNOWN, resolved by asking.
            if never_sent(exc):
                return ProviderAnswer(FAILED, reason="provider unreachable")
            return ProviderAnswer(UNKNOWN, reason="provider timed out or the connection was lost")
        if response.status_code >= 500:
            return ProviderAnswer(UNKNOWN, reason=f"provider answered {response.status_code}")
        if response.status_code not in accepted:
            return ProviderAnswer(FAILED, reason=f"provider refused ({response.status_code})")
        return response

    def _get(self, integration: MerchantIntegration, path: str, *, unknown_reason: str):
        """GET, signed, where something stands at the provider: its 200 response, else the
        ProviderAnswer it comes to (FAILED only on a 404: `unknown_reason`; never guessed otherwise)."""
        try:
            url = self._endpoint(integration) + path
        except ValueError as exc:
            return ProviderAnswer(UNKNOWN, reason=str(exc))
        headers = {"X-Signature": signature(path.encode(), integration.credential)}
        try:
            response = self._call(integration, "GET", url, retries=1, headers=headers)
        except outbound.RefusedUrl as exc:
            # Never guessed: it stays UNKNOWN (PENDING) until the endpoint is one the guard accepts.
            return ProviderAnswer(UNKNOWN, reason=f"provider endpoint refused: {exc}")
        except requests.RequestException:
            return ProviderAnswer(UNKNOWN, reason="provider unreachable")
        if response.status_code == 404:
            return ProviderAnswer(FAILED, reason=unknown_reason)
        if response.status_code != 200:
            return ProviderAnswer(UNKNOWN, reason=f"provider answered {response.status_code}")
        return response

    def create_payment(self, *, integration, code, amount, currency, expires_at) -> ProviderAnswer:
        payload = {
            "txnRef": code,
            "amount": amount * 100,
            "currency": currency,
            "channel": self.channel,
            "ipnUrl": settings.PAYMENT_IPN_BASE_URL.rstrip("/") + self.ipn_path,
            "expiresAt": expires_at.isoformat() if expires_at else None,
        }
        response = self._post(integration, "/payments", payload, accepted=(200, 201))
        if isinstance(response, ProviderAnswer):
            return response
        data = self._read(response)
        if isinstance(data, ProviderAnswer):
            return data
        return ProviderAnswer(SENT, reference=str(data.get("transactionNo") or ""), qr_payload=str(data.get("qrPayload") or ""))

    def query_payment(self, *, integration, code) -> ProviderAnswer:
        response = self._get(integration, f"/payments/{code}", unknown_reason="provider does not know the payment")
        if isinstance(response, ProviderAnswer):
            return response
        data = self._read(response)
        if isinstance(data, ProviderAnswer):
            return data
        status = data.get("status")
        if status not in (PENDING, PAID, FAILED):
            return ProviderAnswer(UNKNOWN, reason="provider status unreadable")
        return ProviderAnswer(
            status,
            reference=str(data.get("transactionNo") or ""),
            bank_code=str(data.get("bankCode") or ""),
            pay_date=str(data.get("payDate") or ""),
        )

    def refund(self, *, integration, code, payment_code, payment_reference, amount, currency, reason) -> ProviderAnswer:
        payload = {
            "refundRef": code,
            "txnRef": payment_code,
            "transactionNo": payment_reference,
            "amount": amount * 100,
            "currency": currency,
            "channel": self.channel,
            "reason": reason,
            "callbackUrl": settings.PAYMENT_IPN_BASE_URL.rstrip("/") + REFUND_CALLBACK_PATH,
        }
        response = self._post(integration, "/refunds", payload, accepted=(200, 202))
        if isinstance(response, ProviderAnswer):
            return response
        return self._refund_answer(response, accepted=response.status_code == 202)

    def query_refund(self, *, integration, code) -> ProviderAnswer:
        response = self._get(integration, f"/refunds/{code}", unknown_reason=REFUND_NOT_FOUND)
        if isinstance(response, ProviderAnswer):
            return response
        return self._refund_answer(response, accepted=False)

    @staticmethod
    def _read(response: requests.Response):
        """The provider's JSON object, or UNKNOWN when it cannot be read (not JSON, or JSON that is
        not an object): it may have acted."""
        try:
            data = response.json()
        except ValueError:
            data = None
        return data if isinstance(data, dict) else ProviderAnswer(UNKNOWN, reason="provider answer unreadable")

    def _refund_answer(self, response: requests.Response, *, accepted: bool) -> ProviderAnswer:
        data = self._read(response)
        if isinstance(data, ProviderAnswer):
            return data
        status = data.get("status")
        if status not in ((PENDING,) if accepted else (PENDING, SUCCEEDED, FAILED)):
            return ProviderAnswer(UNKNOWN, reason="provider status unreadable")
        reason = str(data.get("reason") or "") or ("provider refused the refund" if status == FAILED else "")
        return ProviderAnswer(status, reference=str(data.get("refundNo") or ""), reason=reason)


class SystemConnector(Connector):
    """Manual system confirmation: nothing to call; the attempt waits for /api/pay/system/ipn."""

    channel = "SYSTEM"
    ipn_path = "/api/pay/system/ipn"

    def create_payment(self, *, integration, code, amount, currency, expires_at) -> ProviderAnswer:
        return ProviderAnswer(SENT)

    def query_payment(self, *, integration, code) -> ProviderAnswer:
        return ProviderAnswer(PENDING)

    def refund(self, *, integration, code, payment_code, payment_reference, amount, currency, reason) -> ProviderAnswer:
        """Cash back at the till: it waits for the caller's confirmation (/refunds/{id}/actions/confirm)."""
        return ProviderAnswer(PENDING)

    def query_refund(self, *, integration, code) -> ProviderAnswer:
        return ProviderAnswer(PENDING)


CONNECTORS: dict[str, Connector] = {
    "QR": HttpConnector("QR", "/api/pay/provider/qr-mms/ipn"),
    "PHONE_POS": HttpConnector("PHONE_POS", "/api/pay/provider/phone-pos/ipn"),
    "SMART_POS": HttpConnector("SMART_POS", "/api/pay/provider/smart-pos/ipn"),
    "SYSTEM": SystemConnector(),
}
