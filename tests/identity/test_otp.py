"""One-time passwords: request, verify, limits, delivery by mail (real SMTP) and SMS (fake provider)."""

from __future__ import annotations

import statistics
import threading
import time

import pytest
from django.utils import timezone

from apps.identity import delivery, otp, passwords
from apps.identity.models import User
from tests.identity.conftest import API, PASSWORD, post, sign_in, sign_up

pytestmark = pytest.mark.django_db(databases="__all__")


def request_code(client, namespace: str, identifier: str):
    return post(client, f"/auth/otp/{namespace}/request", {"identifier": identifier})


def make_user(**identifiers) -> User:
    return User.objects.create(password_hash=passwords.hash_password(PASSWORD), **identifiers)


@pytest.fixture
def mail_flow(smtp_server, run_tasks_inline):
    return smtp_server


@pytest.fixture
def sms_flow(sms_provider, run_tasks_inline):
    return sms_provider


def test_verify_email_by_code(client, mail_flow):
    body = sign_up(client, email="verify@example.com")
    accepted = request_code(client, "verify-email", "Verify@Example.com")
    assert accepted.status_code == 202
    assert accepted.json() == {"namespace": "verify-email", "channel": "email", "status": "ACCEPTED", "expiresIn": 600, "resendAfter": 60}
    code = mail_flow.code_for("verify@example.com")
    assert code not in accepted.content.decode()
    verified = post(client, "/auth/otp/verify-email/verify", {"identifier": "verify@example.com", "code": code})
    assert verified.status_code == 200 and verified.json()["user"]["emailVerified"] is True
    # A code works once.
    again = post(client, "/auth/otp/verify-email/verify", {"identifier": "verify@example.com", "code": code})
    assert again.status_code == 400 and again.json()["code"] == "OTP_INVALID"
    assert body["user"]["emailVerified"] is False


def test_phone_auth_signs_in_by_sms(client, sms_flow):
    make_user(phone="+14155550199", phone_verified_at=timezone.now())
    assert request_code(client, "phone-auth", "+1 415 555 0199").status_code == 202
    sent = sms_flow.received[-1]
    assert sent["authorization"] == f"Bearer {sms_flow.token}"
    assert sent["json"]["to"] == "+14155550199" and sent["json"]["from"]
    tokens = post(client, "/auth/otp/phone-auth/verify", {"identifier": "+14155550199", "code": sms_flow.code_for("+14155550199")})
    assert tokens.status_code == 200
    assert tokens.json()["user"]["phoneVerified"] is True
    assert client.get(f"{API}/users/me", HTTP_AUTHORIZATION=f"Bearer {tokens.json()['accessToken']}").status_code == 200


def test_forgot_password_resets_it_and_ends_sessions(client, mail_flow):
    body = sign_up(client, email="forgot@example.com")
    assert request_code(client, "forgot-password", "forgot@example.com").status_code == 202
    code = mail_flow.code_for("forgot@example.com")
    weak = post(client, "/auth/otp/forgot-password/reset", {"identifier": "forgot@example.com", "code": code, "newPassword": "short"})
    assert weak.status_code == 400 and weak.json()["errors"][0]["field"] == "newPassword"
    reset = post(
        client, "/auth/otp/forgot-password/reset", {"identifier": "forgot@example.com", "code": code, "newPassword": "a brand new password"}
    )
    assert reset.status_code == 204
    assert sign_in(client, "forgot@example.com").status_code == 401
    assert sign_in(client, "forgot@example.com", "a brand new password").status_code == 200
    assert post(client, "/auth/refresh", {"refreshToken": body["refreshToken"]}).status_code == 401


def test_unknown_identifiers_get_the_same_answer(client, mail_flow):
    make_user(email="exists@example.com")
    known = request_code(client, "forgot-password", "exists@example.com")
    unknown = request_code(client, "forgot-password", "missing@example.com")
    assert (known.status_code, known.json()) == (unknown.status_code, unknown.json())
    assert mail_flow.wait(1) and all("missing@example.com" not in m["to"] for m in mail_flow.messages)
    known_again, unknown_again = (request_code(client, "forgot-password", i) for i in ("exists@example.com", "missing@example.com"))
    assert known_again.status_code == unknown_again.status_code == 429
    assert known_again.json()["code"] == unknown_again.json()["code"] == "OTP_COOLDOWN"
    # Verifying for an identifier nobody received a code for looks like a wrong code.
    wrong = post(
        client,
        "/auth/otp/forgot-password/reset",
        {"identifier": "missing@example.com", "code": "123456", "newPassword": "whatever it is now"},
    )
    assert wrong.status_code == 400 and wrong.json()["code"] == "OTP_INVALID"


def test_known_and_unknown_identifiers_take_the_same_time(client, smtp_server, settings):
    """The request does the same work either way (the account lookup is in the delivery task).
    Calls alternate between a known and an unknown identifier; the medians stay within a loose
    bound of each other (loose: other work on the machine adds noise to single calls)."""
    settings.IDENTITY_OTP_RESEND_COOLDOWN_SECONDS = 0
    known = [make_user(email=f"timing{index}@example.com").email for index in range(12)]
    unknown = [f"nobody{index}@example.com" for index in range(12)]
    request_code(client, "forgot-password", "warmup@example.com")
    durations = {"known": [], "unknown": []}
    for known_email, unknown_email in zip(known, unknown, strict=True):
        for label, email in (("known", known_email), ("unknown", unknown_email)):
            started = time.perf_counter()
            assert request_code(client, "forgot-password", email).status_code == 202
            durations[label].append(time.perf_counter() - started)
    known_ms, unknown_ms = (statistics.median(values) * 1000 for values in durations.values())
    assert abs(known_ms - unknown_ms) < max(5.0, 0.5 * max(known_ms, unknown_ms)), (known_ms, unknown_ms)


def test_five_wrong_codes_lock_the_identifier(client, mail_flow, settings):
    settings.IDENTITY_OTP_LOCKOUT_SECONDS = 600
    make_user(email="locked@example.com")
    request_code(client, "verify-email", "locked@example.com")
    code = mail_flow.code_for("locked@example.com")
    wrong = "000000" if code != "000000" else "111111"
    remaining = []
    for _ in range(4):
        response = post(client, "/auth/otp/verify-email/verify", {"identifier": "locked@example.com", "code": wrong})
        assert response.status_code == 400
        remaining.append(response.json()["attemptsRemaining"])
    assert remaining == [4, 3, 2, 1]
    fifth = post(client, "/auth/otp/verify-email/verify", {"identifier": "locked@example.com", "code": wrong})
    assert fifth.status_code == 429 and fifth.json()["code"] == "OTP_LOCKED"
    assert int(fifth["Retry-After"]) == 600
    right = post(client, "/auth/otp/verify-email/verify", {"identifier": "locked@example.com", "code": code})
    assert right.status_code == 429 and right.json()["code"] == "OTP_LOCKED"
    assert request_code(client, "verify-email", "locked@example.com").json()["code"] == "OTP_LOCKED"


def test_cooldown_and_daily_quota(client, smtp_server, settings):
    retry = request_code(client, "verify-email", "quota@example.com")
    assert retry.status_code == 202
    cooling = request_code(client, "verify-email", "quota@example.com")
    assert cooling.status_code == 429 and cooling.json()["code"] == "OTP_COOLDOWN"
    assert 0 < int(cooling["Retry-After"]) <= 60
    settings.IDENTITY_OTP_RESEND_COOLDOWN_SECONDS = 0
    settings.IDENTITY_OTP_DAILY_QUOTA = 3
    for _ in range(2):  # the quota counts every namespace: 1 + 2 codes
        assert request_code(client, "forgot-password", "quota@example.com").status_code == 202
    over = request_code(client, "forgot-password", "quota@example.com")
    assert over.status_code == 429 and over.json()["code"] == "OTP_DAILY_QUOTA_EXCEEDED"


def test_identifier_must_fit_the_namespace(client, smtp_server, sms_provider):
    response = request_code(client, "verify-email", "+14155550123")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "identifier"
    assert request_code(client, "phone-auth", "someone@example.com").status_code == 400
    assert request_code(client, "no-such-namespace", "someone@example.com").status_code == 404


def test_without_mail_or_sms_settings_the_flows_fail_with_a_clear_code(client, settings):
    settings.IDENTITY_MAIL_ENABLED = False
    settings.SMS_PROVIDER = ""
    mail = request_code(client, "verify-email", "nomail@example.com")
    sms = request_code(client, "phone-auth", "+14155550123")
    assert (mail.status_code, mail.json()["code"]) == (503, "MAIL_NOT_CONFIGURED")
    assert (sms.status_code, sms.json()["code"]) == (503, "SMS_NOT_CONFIGURED")


def test_redis_down_means_503_for_otp_while_sign_in_works(client, smtp_server, dead_redis):
    sign_up(client, verified=True, email="storeless@example.com")
    response = request_code(client, "forgot-password", "storeless@example.com")
    assert response.status_code == 503 and response.json()["code"] == "OTP_STORE_UNAVAILABLE"
    verify = post(client, "/auth/otp/verify-email/verify", {"identifier": "storeless@example.com", "code": "123456"})
    assert verify.status_code == 503
    assert sign_in(client, "storeless@example.com").status_code == 200


def test_the_http_sms_adapter_speaks_the_providers_protocol(sms_provider):
    delivery.HttpSmsProvider().send(to="+14155550100", text="hello")
    assert sms_provider.received[-1]["json"] == {"from": "MerchantPlatform", "to": "+14155550100", "text": "hello"}
    sms_provider.status = 503
    with pytest.raises(delivery.TransientDeliveryError):
        delivery.HttpSmsProvider().send(to="+14155550100", text="hello")
    sms_provider.status = 400
    with pytest.raises(delivery.PermanentDeliveryError):
        delivery.HttpSmsProvider().send(to="+14155550100", text="hello")


class _SlowAfterReply:
    """A Redis client whose caller, in the threads that ask for it, is descheduled for a moment
    right after Redis answered a script (what a busy process does): it widens the window between
    two steps of a verification, where parallel verifications used to slip through."""

    def __init__(self, client, pause):
        self.client, self.pause = client, pause

    def __getattr__(self, name):
        return getattr(self.client, name)

    def eval(self, *args):
        result = self.client.eval(*args)
        if getattr(self.pause, "seconds", 0):
            time.sleep(self.pause.seconds)
        return result


def test_the_attempt_limit_holds_for_parallel_verifications(monkeypatch, settings):
    """The last allowed wrong guess and, a moment later, several right ones in parallel: once the
    limit is reached nothing is compared any more, so none of the right guesses gets in. (Before the
    check, comparison and lockout were one Redis step, the right guesses were compared while the
    last wrong one was still on its way to setting the lock, and one of them signed in.)"""
    identifier = "+14155550142"
    code = otp.issue(otp.PHONE_AUTH, "phone", identifier)
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(settings.IDENTITY_OTP_MAX_ATTEMPTS - 1):
        with pytest.raises(otp.OtpInvalid):
            otp.consume(otp.PHONE_AUTH, "phone", identifier, wrong)
    pause = threading.local()
    real = otp._redis
    monkeypatch.setattr(otp, "_redis", lambda: _SlowAfterReply(real(), pause))
    outcomes, start = [], threading.Barrier(6)

    def guess(value: str, delay: float, slow: bool):
        pause.seconds = 0.4 if slow else 0
        start.wait()
        time.sleep(delay)
        try:
            otp.consume(otp.PHONE_AUTH, "phone", identifier, value)
            outcomes.append("accepted")
        except (otp.OtpInvalid, otp.OtpRejected) as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=guess, args=(wrong, 0, True))]
    threads += [threading.Thread(target=guess, args=(code, 0.1, False)) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["OTP_LOCKED"] * 6
    with pytest.raises(otp.OtpRejected):
        otp.consume(otp.PHONE_AUTH, "phone", identifier, code)


# --- Account pre-hijack: an identifier nobody verified ----------------------------------------------


def test_an_unverified_email_or_phone_does_not_sign_in(client):
    """Someone typed the victim's email and phone at sign-up: neither signs in with that password
    until verified (both did)."""
    sign_up(client, email="victim@example.com", phone="+14155550177", username="squatter")
    for identifier in ("victim@example.com", "+14155550177"):
        refused = sign_in(client, identifier)
        assert refused.status_code == 403 and refused.json()["code"] == "IDENTIFIER_UNVERIFIED"
        assert "accessToken" not in refused.json()
        # Without the password nothing tells the identifier is unverified.
        assert sign_in(client, identifier, "guess guess guess").json()["code"] == "INVALID_CREDENTIALS"
    assert sign_in(client, "squatter").status_code == 200  # a username is a name, not a channel


def test_phone_otp_does_not_sign_in_to_an_account_whose_phone_nobody_verified(client, sms_flow):
    """The SMS code proves the caller holds the phone, not that the account is theirs: its creator
    (who holds its password) would share the victim's account (it signed in)."""
    make_user(phone="+14155550178", username="planted")
    request_code(client, "phone-auth", "+14155550178")
    refused = post(client, "/auth/otp/phone-auth/verify", {"identifier": "+14155550178", "code": sms_flow.code_for("+14155550178")})
    assert refused.status_code == 403 and refused.json()["code"] == "IDENTIFIER_UNVERIFIED"
    assert "accessToken" not in refused.json()


def test_a_reset_through_one_channel_drops_the_unverified_identifiers(client, sms_flow):
    """The phone's owner resets the password by SMS: the email nobody verified leaves the account
    (it stayed, and with it whoever had typed it), the phone becomes verified and signs in."""
    planted = sign_up(client, phone="+14155550179", email="attacker@example.com", username="planted2")
    request_code(client, "forgot-password", "+14155550179")
    code = sms_flow.code_for("+14155550179")
    body = {"identifier": "+14155550179", "code": code, "newPassword": "the owner's new password"}
    assert post(client, "/auth/otp/forgot-password/reset", body).status_code == 204
    user = User.objects.get(pk=int(planted["user"]["id"]))
    assert user.email is None and user.phone == "+14155550179" and user.phone_verified_at is not None
    assert sign_in(client, "attacker@example.com", "the owner's new password").status_code == 401
    assert sign_in(client, "+14155550179", "the owner's new password").status_code == 200
    assert post(client, "/auth/refresh", {"refreshToken": planted["refreshToken"]}).status_code == 401


def test_a_reset_by_email_drops_an_unverified_phone(client, smtp_server, run_tasks_inline):
    owner = sign_up(client, verified=True, phone="+14155550180", email="owner@example.com")
    User.objects.filter(pk=int(owner["user"]["id"])).update(phone_verified_at=None)
    request_code(client, "forgot-password", "owner@example.com")
    body = {"identifier": "owner@example.com", "code": smtp_server.code_for("owner@example.com"), "newPassword": "another new password"}
    assert post(client, "/auth/otp/forgot-password/reset", body).status_code == 204
    user = User.objects.get(pk=int(owner["user"]["id"]))
    assert (user.email, user.phone) == ("owner@example.com", None)


def test_a_reset_does_not_reach_an_account_the_identifier_left_meanwhile(client, mail_flow, monkeypatch):
    """The email moved to another address between the code's check and the reset's lock: the reset
    must not set the password of an account that no longer holds the address."""
    from apps.identity import services

    body = sign_up(client, verified=True, email="moving@example.com")
    request_code(client, "forgot-password", "moving@example.com")
    code = mail_flow.code_for("moving@example.com")
    original = services._consume

    def consume_then_move(*args):
        parsed, user = original(*args)
        User.objects.filter(pk=user.pk).update(email="moved@example.com")
        return parsed, user

    monkeypatch.setattr(services, "_consume", consume_then_move)
    reset = post(
        client, "/auth/otp/forgot-password/reset", {"identifier": "moving@example.com", "code": code, "newPassword": "a brand new password"}
    )
    assert reset.status_code == 400 and reset.json()["code"] == "OTP_INVALID"
    assert post(client, "/auth/refresh", {"refreshToken": body["refreshToken"]}).status_code == 200
