"""Item 12: AES-256-GCM under APP_ENV_APPLICATION_SECRET, masking, and HTTP Basic between services."""

from __future__ import annotations

import base64
import hmac

import pytest

from merchant_platform import crypto
from merchant_platform.verification import service_accounts
from merchant_platform.verification.service_accounts import basic_auth_header

pytestmark = pytest.mark.usefixtures("kernel_urls")


def test_round_trip_under_the_application_secret():
    token = crypto.encrypt("s3cr3t-provider-key")
    assert token.startswith("v1.") and "s3cr3t" not in token
    assert crypto.decrypt(token) == "s3cr3t-provider-key"
    # A fresh nonce each time: the same plaintext never seals to the same token.
    assert crypto.encrypt("s3cr3t-provider-key") != token
    assert crypto.decrypt_bytes(crypto.encrypt(b"\x00\xffbinary")) == b"\x00\xffbinary"


def test_the_format_is_versioned_and_bound_to_its_purpose_and_context():
    token = crypto.encrypt("value", purpose="webhook", associated_data=b"merchant:7")
    version, _, body = token.partition(".")
    assert version == crypto.VERSION
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    assert len(raw) == crypto.NONCE_BYTES + len("value") + 16  # nonce | ciphertext | GCM tag
    assert crypto.decrypt(token, purpose="webhook", associated_data=b"merchant:7") == "value"
    for wrong in ({"purpose": "credential", "associated_data": b"merchant:7"}, {"purpose": "webhook", "associated_data": b"merchant:8"}):
        with pytest.raises(crypto.DecryptionFailed):
            crypto.decrypt(token, **wrong)


def test_a_wrong_secret_is_a_logged_decrypt_failed_and_a_clear_error(settings, log_lines):
    token = crypto.encrypt("provider-password")
    settings.APP_ENV_APPLICATION_SECRET = "a-different-deployment-secret"
    with pytest.raises(crypto.DecryptionFailed) as failure:
        crypto.decrypt(token)
    assert failure.value.code == "DECRYPT_FAILED"
    assert "APP_ENV_APPLICATION_SECRET" in str(failure.value.detail)
    (line,) = log_lines.matching("event='decrypt failed'")
    assert "level='error'" in line and "reason='InvalidTag'" in line
    assert "provider-password" not in line and token not in line


@pytest.mark.parametrize(
    "tampered",
    [
        lambda token: token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1],  # flipped ciphertext/tag bits
        lambda token: "v2." + token[3:],  # unknown version
        lambda token: token[:20],  # truncated
        lambda token: "v1.!!!not-base64!!!",
        lambda token: "",
    ],
)
def test_tampered_ciphertext_fails_cleanly(tampered, log_lines):
    with pytest.raises(crypto.DecryptionFailed):
        crypto.decrypt(tampered(crypto.encrypt("value")))
    assert len(log_lines.matching("event='decrypt failed'")) == 1


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        (None, ""),
        ("", ""),
        ("short", "********"),
        ("fifteen-chars!!", "********"),
        ("sk_live_1234567890abcdef", "********cdef"),
    ],
)
def test_mask_never_reveals_a_secret(value, masked):
    assert crypto.mask(value) == masked


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_basic_auth_accepts_the_right_password(client, settings):
    settings.SERVICE_BASIC_AUTH_ACCOUNTS = {"payment": "correct horse battery staple"}
    response = client.get("/kernel-test/service-only", headers={"Authorization": _basic("payment", "correct horse battery staple")})
    assert (response.status_code, response.json()) == (200, {"caller": "payment"})


@pytest.mark.parametrize(
    ("header", "detail"),
    [
        (_basic("payment", "wrong password"), "Invalid service credentials."),
        (_basic("payment", ""), "Invalid service credentials."),
        (_basic("stranger", "correct horse battery staple"), "Invalid service credentials."),
        ("Basic not*base64", "Malformed Basic credentials."),
        ("Basic " + base64.b64encode(b"no-colon").decode(), "Malformed Basic credentials."),
        ("Basic " + base64.b64encode(b"\xff\xfe:x").decode(), "Malformed Basic credentials."),
    ],
)
def test_basic_auth_refuses_bad_credentials(client, settings, header, detail):
    settings.SERVICE_BASIC_AUTH_ACCOUNTS = {"payment": "correct horse battery staple"}
    response = client.get("/kernel-test/service-only", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["detail"] == detail
    assert response["WWW-Authenticate"] == 'Basic realm="services"'


def test_basic_auth_compares_in_constant_time_even_for_unknown_users(client, settings, monkeypatch):
    settings.SERVICE_BASIC_AUTH_ACCOUNTS = {"payment": "correct horse battery staple"}
    compared = []
    compare_digest = hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return compare_digest(a, b)

    monkeypatch.setattr(service_accounts.hmac, "compare_digest", spy)
    assert client.get("/kernel-test/service-only", headers={"Authorization": _basic("payment", "guess")}).status_code == 401
    assert client.get("/kernel-test/service-only", headers={"Authorization": _basic("nobody", "guess")}).status_code == 401
    assert [a for a, _ in compared] == [b"guess", b"guess"]
    assert compared[0][1] == b"correct horse battery staple"


def test_outgoing_header_outside_every_service_uses_the_configured_account(settings):
    settings.SERVICE_BASIC_AUTH_USER, settings.SERVICE_BASIC_AUTH_CREDENTIALS = "inventory", {"inventory": "p@ss:word"}
    assert basic_auth_header() == _basic("inventory", "p@ss:word")
    assert basic_auth_header("other", "x") == _basic("other", "x")
