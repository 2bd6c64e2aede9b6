"""A fake payment provider for development and tests: a small real HTTP server that speaks the
provider protocol of apps/payment/connectors.py and calls our IPN endpoints back with a correctly
signed body (spec 2.3, 5), retrying on failure on the spec's schedule (spec 8: QR 5 retries every
5 minutes; POS 3 every 2 minutes), with the interval configurable so tests run in seconds.

    provider = FakeProvider(secret="s3cret", retry_interval_seconds=0.1).start()
    ... integration settings {"endpoint": provider.url} ...
    provider.pay("PA...")              # the customer pays: the IPN is sent (and retried)
    provider.refund_mode = "async"     # refunds: "sync" (answered SUCCEEDED), "fail" (answered FAILED),
    provider.complete_refund("RF...")  # or "async" (accepted, 202; the signed callback when completed)
    provider.stop()

Not a service module: nothing in payment imports it; `manage.py fake_provider` runs it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from apps.payment import ipn

# Spec 8: retries after the first call, per channel.
RETRIES = {"QR": 5, "PHONE_POS": 3, "SMART_POS": 3, "SYSTEM": 0}
INTERVALS = {"QR": 300.0, "PHONE_POS": 120.0, "SMART_POS": 120.0, "SYSTEM": 0.0}


@dataclass
class FakePayment:
    txn_ref: str
    amount: int  # as sent: minor units x 100
    currency: str
    channel: str
    ipn_url: str
    transaction_no: str
    status: str = "PENDING"
    bank_code: str = "NCB"
    pay_date: str = ""
    ipn_replies: list = field(default_factory=list)  # (status code or error, RspCode)


@dataclass
class FakeRefund:
    refund_ref: str
    txn_ref: str
    amount: int  # as sent: minor units x 100
    currency: str
    channel: str
    callback_url: str
    refund_no: str
    status: str = "PENDING"
    reason: str = ""
    callback_replies: list = field(default_factory=list)  # (status code or error, RspCode)


class FakeProvider:
    def __init__(
        self,
        *,
        secret: str,
        host: str = "127.0.0.1",
        port: int = 0,
        retry_interval_seconds: float | None = None,
        create_delay_seconds: float = 0.0,
        json_ipn: bool = True,
    ):
        self.secret = secret
        self.retry_interval_seconds = retry_interval_seconds
        self.create_delay_seconds = create_delay_seconds  # > the client's timeout: an UNKNOWN attempt
        self.json_ipn = json_ipn
        self.payments: dict[str, FakePayment] = {}
        self.refunds: dict[str, FakeRefund] = {}
        self.refund_mode = "sync"
        self.refund_delay_seconds = 0.0  # > the client's timeout: a refund left PENDING, resolved by asking
        self.refused_signatures = 0
        self._counter = 14000000
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._threads: list[threading.Thread] = []
        self._serving = False

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeProvider:
        thread = threading.Thread(target=self._server.serve_forever, name="fake-provider", daemon=True)
        thread.start()
        self._serving = True
        return self

    def stop(self) -> None:
        """Stop serving (a no-op when stopped or never started: shutdown() would wait forever)."""
        if self._serving:
            self._serving = False
            self._server.shutdown()
        self._server.server_close()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def _signed(self, body: bytes, given: str | None) -> bool:
        expected = hmac.new(self.secret.encode(), body, hashlib.sha512).hexdigest().upper()
        return given is not None and hmac.compare_digest(expected.encode(), given.encode())

    def ipn_fields(self, payment: FakePayment, *, response_code: str = "00") -> dict:
        fields = {
            "prov_TxnRef": payment.txn_ref,
            "prov_TransactionNo": payment.transaction_no,
            "prov_Amount": str(payment.amount),
            "prov_ResponseCode": response_code,
            "prov_BankCode": payment.bank_code,
            "prov_PayDate": payment.pay_date,
        }
        fields["prov_SecureHash"] = ipn.sign(fields, self.secret)
        return fields

    def pay(self, txn_ref: str, *, response_code: str = "00", wait: bool = False) -> threading.Thread:
        """The customer pays (or the payment fails, response_code != "00"): send the IPN, retried."""
        payment = self.payments[txn_ref]
        payment.status = "PAID" if response_code == "00" else "FAILED"
        payment.pay_date = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        thread = threading.Thread(target=self._notify, args=(payment, response_code), daemon=True)
        thread.start()
        self._threads.append(thread)
        if wait:
            thread.join()
        return thread

    def _notify(self, payment: FakePayment, response_code: str) -> None:
        self._call_back(payment.channel, payment.ipn_url, self.ipn_fields(payment, response_code=response_code), payment.ipn_replies)

    def _call_back(self, channel: str, url: str, fields: dict, replies: list) -> None:
        """POST the signed fields until acknowledged (RspCode 00 or 02), on the channel's schedule."""
        interval = INTERVALS[channel] if self.retry_interval_seconds is None else self.retry_interval_seconds
        for attempt in range(RETRIES[channel] + 1):
            if attempt:
                time.sleep(interval)
            try:
                if self.json_ipn:
                    response = requests.post(url, json=fields, timeout=5)
                else:
                    response = requests.post(url, data=fields, timeout=5)
                code = response.json().get("RspCode") if response.status_code == 200 else None
                replies.append((response.status_code, code))
            except (requests.RequestException, ValueError) as exc:
                replies.append((type(exc).__name__, None))
                continue
            if code in ("00", "02"):  # acknowledged: stop retrying
                return

    def refund_callback_fields(self, refund: FakeRefund, *, response_code: str = "00") -> dict:
        fields = {
            "prov_RefundRef": refund.refund_ref,
            "prov_TxnRef": refund.txn_ref,
            "prov_RefundNo": refund.refund_no,
            "prov_Amount": str(refund.amount),
            "prov_ResponseCode": response_code,
        }
        fields["prov_SecureHash"] = ipn.sign(fields, self.secret)
        return fields

    def complete_refund(self, refund_ref: str, *, succeeded: bool = True, wait: bool = False) -> threading.Thread:
        """An accepted refund is done (or failed at the bank): the signed callback is sent, retried."""
        refund = self.refunds[refund_ref]
        refund.status = "SUCCEEDED" if succeeded else "FAILED"
        refund.reason = "" if succeeded else "bank refused the refund"
        fields = self.refund_callback_fields(refund, response_code="00" if succeeded else "05")
        thread = threading.Thread(
            target=self._call_back, args=(refund.channel, refund.callback_url, fields, refund.callback_replies), daemon=True
        )
        thread.start()
        self._threads.append(thread)
        if wait:
            thread.join()
        return thread

    def _take_refund(self, data: dict) -> tuple[int, dict]:
        """The refund call: checked against the payment it names and what that payment has left."""
        payment = self.payments.get(str(data.get("txnRef")))
        with self._lock:
            self._counter += 1
            refund = FakeRefund(
                refund_ref=str(data["refundRef"]),
                txn_ref=str(data["txnRef"]),
                amount=int(data["amount"]),
                currency=str(data["currency"]),
                channel=str(data["channel"]),
                callback_url=str(data["callbackUrl"]),
                refund_no=f"R{self._counter}",
            )
            if refund.refund_ref in self.refunds:  # a retried call: the same refund, as it stands
                refund = self.refunds[refund.refund_ref]
            else:
                refunded = sum(r.amount for r in self.refunds.values() if r.txn_ref == refund.txn_ref and r.status != "FAILED")
                if payment is None:
                    refund.status, refund.reason = "FAILED", "unknown payment"
                elif refunded + refund.amount > payment.amount:
                    refund.status, refund.reason = "FAILED", "amount exceeds what the payment has left"
                elif self.refund_mode == "fail":
                    refund.status, refund.reason = "FAILED", "refund declined"
                elif self.refund_mode == "sync":
                    refund.status = "SUCCEEDED"
                self.refunds[refund.refund_ref] = refund
        body = {"status": refund.status, "refundNo": refund.refund_no, "reason": refund.reason}
        return (202 if refund.status == "PENDING" else 200), body

    def _handler_class(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # quiet: tests read the provider's state instead
                return

            def _answer(self, status: int, body: dict | None = None) -> None:
                data = json.dumps(body or {}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _unsigned(self, signed: bytes) -> bool:
                """True, answered 401 and counted, when the request's X-Signature is not over `signed`."""
                if provider._signed(signed, self.headers.get("X-Signature")):
                    return False
                provider.refused_signatures += 1
                self._answer(401, {"error": "bad signature"})
                return True

            def _finish(self, records: dict, ref: str, finish, status: str, unknown: str) -> None:
                """The customer or the bank finishing a payment or a refund the provider knows."""
                if ref not in records:
                    return self._answer(404, {"error": unknown})
                finish(ref)
                return self._answer(202, {"status": status})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.startswith("/refunds/") and self.path.endswith("/complete"):
                    # The bank finished an accepted refund (development: `curl -X POST {url}/refunds/<ref>/complete`).
                    refund_ref = self.path.removeprefix("/refunds/").removesuffix("/complete")
                    return self._finish(provider.refunds, refund_ref, provider.complete_refund, "SUCCEEDED", "unknown refund")
                if self.path == "/refunds":
                    if self._unsigned(body):
                        return None
                    if provider.refund_delay_seconds:
                        time.sleep(provider.refund_delay_seconds)
                    return self._answer(*provider._take_refund(json.loads(body)))
                if self.path.startswith("/payments/") and self.path.endswith("/pay"):
                    # The customer pays (development: `curl -X POST {url}/payments/<code>/pay`).
                    txn_ref = self.path.removeprefix("/payments/").removesuffix("/pay")
                    return self._finish(provider.payments, txn_ref, provider.pay, "PAID", "unknown payment")
                if self.path != "/payments":
                    return self._answer(404)
                if self._unsigned(body):
                    return None
                if provider.create_delay_seconds:
                    time.sleep(provider.create_delay_seconds)
                data = json.loads(body)
                with provider._lock:
                    provider._counter += 1
                    payment = FakePayment(
                        txn_ref=data["txnRef"],
                        amount=int(data["amount"]),
                        currency=data["currency"],
                        channel=data["channel"],
                        ipn_url=data["ipnUrl"],
                        transaction_no=str(provider._counter),
                    )
                    provider.payments[payment.txn_ref] = payment
                qr = f"00020101021238570010A000000727012700069704220113{payment.txn_ref}5303704540{payment.amount}"
                return self._answer(201, {"transactionNo": payment.transaction_no, "qrPayload": qr})

            def do_GET(self):
                if not self.path.startswith(("/payments/", "/refunds/")):
                    return self._answer(404)
                if self._unsigned(self.path.encode()):
                    return None
                if self.path.startswith("/refunds/"):
                    refund = provider.refunds.get(self.path.removeprefix("/refunds/"))
                    if refund is None:
                        return self._answer(404, {"error": "unknown refund"})
                    return self._answer(200, {"status": refund.status, "refundNo": refund.refund_no, "reason": refund.reason})
                payment = provider.payments.get(self.path.removeprefix("/payments/"))
                if payment is None:
                    return self._answer(404, {"error": "unknown payment"})
                return self._answer(
                    200,
                    {
                        "status": payment.status,
                        "transactionNo": payment.transaction_no,
                        "bankCode": payment.bank_code,
                        "payDate": payment.pay_date,
                    },
                )

        return Handler
