"""One-time passwords in Redis (spec 5 and 8): namespaces verify-email, phone-auth, forgot-password.

Per (namespace, identifier) Redis holds the code's HMAC (never the code), an attempt counter, a
lockout mark and a resend cooldown; per identifier a daily quota counter. Identifiers appear in
keys only as keyed digests. Every rule is keyed by the identifier whether or not an account has it,
so an unknown identifier gets the same answers, in the same time, as a known one: the lookup of the
account happens in the delivery task, after the response.

Limits (settings): IDENTITY_OTP_MAX_ATTEMPTS (5) wrong codes, then IDENTITY_OTP_LOCKOUT_SECONDS
(900) of lockout; IDENTITY_OTP_RESEND_COOLDOWN_SECONDS (60) between requests;
IDENTITY_OTP_DAILY_QUOTA (10) codes per identifier per UTC day; a code lives
IDENTITY_OTP_TTL_SECONDS (600). Redis down: OtpStoreUnavailable (503).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime

import redis
from django.conf import settings
from django_redis import get_redis_connection

from merchant_platform import crypto
from merchant_platform.errors import ApiError, ServiceUnavailable

VERIFY_EMAIL, PHONE_AUTH, FORGOT_PASSWORD = "verify-email", "phone-auth", "forgot-password"
NAMESPACES = (VERIFY_EMAIL, PHONE_AUTH, FORGOT_PASSWORD)
KEY_PREFIX = "mp:identity:otp"
# The task that mails or texts a code (apps/identity/tasks.py), sent by name on the mail queue.
DELIVERY_TASK = "apps.identity.tasks.deliver_one_time_password"
SEAL_PURPOSE = "identity-otp"


def _destination(namespace: str, kind: str, value: str) -> bytes:
    """The associated data that binds a sealed code to its flow and destination: a queued task
    copied with another address or namespace (whoever can write the broker) does not open."""
    return "\n".join((namespace, kind, value)).encode()


def seal(code: str, namespace: str, kind: str, value: str) -> str:
    """The code as it travels in the delivery task's message (AES-GCM, bound to its destination)."""
    return crypto.encrypt(code, purpose=SEAL_PURPOSE, associated_data=_destination(namespace, kind, value))


def unseal(sealed_code: str, namespace: str, kind: str, value: str) -> str:
    """The code `seal` sealed for this destination (crypto.DecryptionFailed for any other)."""
    return crypto.decrypt(sealed_code, purpose=SEAL_PURPOSE, associated_data=_destination(namespace, kind, value))


_REQUEST_SCRIPT = """
local lock, cooldown, quota, code, attempts = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if redis.call('EXISTS', lock) == 1 then return {'LOCKED', redis.call('TTL', lock)} end
if redis.call('EXISTS', cooldown) == 1 then return {'COOLDOWN', redis.call('TTL', cooldown)} end
local used = redis.call('INCR', quota)
if used == 1 then redis.call('EXPIRE', quota, ARGV[3]) end
if used > tonumber(ARGV[2]) then return {'QUOTA', redis.call('TTL', quota)} end
if tonumber(ARGV[1]) > 0 then redis.call('SET', cooldown, '1', 'EX', ARGV[1]) end
redis.call('SET', code, ARGV[4], 'EX', ARGV[5])
redis.call('DEL', attempts)
return {'OK', 0}
"""

# Check, compare and count in one step, so parallel verifications cannot compare more than
# IDENTITY_OTP_MAX_ATTEMPTS codes: the lock, the comparison, the counter, the lockout and the
# single use all happen inside Redis's one-at-a-time script execution. The values compared are
# HMACs of the submitted code, so the comparison's timing reveals nothing about the code.
_ATTEMPT_SCRIPT = """
local lock, code, attempts = KEYS[1], KEYS[2], KEYS[3]
if redis.call('EXISTS', lock) == 1 then return {'LOCKED', redis.call('TTL', lock)} end
local stored = redis.call('GET', code)
if not stored then return {'NONE', 0} end
if stored == ARGV[1] then
  redis.call('DEL', code, attempts)
  return {'OK', 0}
end
local used = redis.call('INCR', attempts)
redis.call('EXPIRE', attempts, ARGV[2])
local remaining = tonumber(ARGV[3]) - used
if remaining <= 0 then
  redis.call('SET', lock, '1', 'EX', ARGV[4])
  redis.call('DEL', code, attempts)
  return {'LOCKED', tonumber(ARGV[4])}
end
return {'WRONG', remaining}
"""


class OtpStoreUnavailable(ServiceUnavailable):
    default_code = "OTP_STORE_UNAVAILABLE"
    default_detail = "One-time passwords are unavailable right now; try again later. Password sign-in still works."


class OtpRejected(ApiError):
    status_code = 429

    def __init__(self, detail: str, *, code: str, wait_seconds: int):
        super().__init__(detail, code=code, extra={"retryAfter": wait_seconds})
        self.wait = wait_seconds


class OtpInvalid(ApiError):
    status_code = 400
    default_code = "OTP_INVALID"
    default_detail = "The code is wrong or has expired."


def _digest(*parts: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), ":".join(parts).encode(), hashlib.sha256).hexdigest()


def _keys(namespace: str, subject: str) -> dict[str, str]:
    base = f"{KEY_PREFIX}:{namespace}:{subject}"
    day = datetime.now(UTC).strftime("%Y%m%d")
    return {
        "lock": f"{base}:lock",
        "cooldown": f"{base}:cooldown",
        "code": f"{base}:code",
        "attempts": f"{base}:attempts",
        "quota": f"{KEY_PREFIX}:quota:{subject}:{day}",
    }


def _subject(kind: str, value: str) -> str:
    return _digest("subject", kind, value)[:32]


def _code_hash(namespace: str, subject: str, code: str) -> str:
    return _digest("code", namespace, subject, code)


def _redis():
    return get_redis_connection("default")


def new_code() -> str:
    length = settings.IDENTITY_OTP_LENGTH
    return str(secrets.randbelow(10**length)).zfill(length)


def issue(namespace: str, kind: str, value: str) -> str:
    """Store a fresh code for (namespace, identifier) and return it; raise OtpRejected (cooldown,
    quota, lockout) or OtpStoreUnavailable."""
    subject = _subject(kind, value)
    keys = _keys(namespace, subject)
    code = new_code()
    try:
        status, wait = _redis().eval(
            _REQUEST_SCRIPT,
            5,
            keys["lock"],
            keys["cooldown"],
            keys["quota"],
            keys["code"],
            keys["attempts"],
            settings.IDENTITY_OTP_RESEND_COOLDOWN_SECONDS,
            settings.IDENTITY_OTP_DAILY_QUOTA,
            26 * 3600,
            _code_hash(namespace, subject, code),
            settings.IDENTITY_OTP_TTL_SECONDS,
        )
    except redis.RedisError:
        raise OtpStoreUnavailable() from None
    status = status.decode() if isinstance(status, bytes) else status
    wait = max(int(wait), 1)
    if status == "LOCKED":
        raise OtpRejected("Too many wrong codes; this identifier is locked for a while.", code="OTP_LOCKED", wait_seconds=wait)
    if status == "COOLDOWN":
        raise OtpRejected("A code was sent a moment ago; wait before asking again.", code="OTP_COOLDOWN", wait_seconds=wait)
    if status == "QUOTA":
        raise OtpRejected("The daily number of codes for this identifier is used up.", code="OTP_DAILY_QUOTA_EXCEEDED", wait_seconds=wait)
    return code


def consume(namespace: str, kind: str, value: str, code: str) -> None:
    """Accept `code` once; raise OtpInvalid, OtpRejected (locked) or OtpStoreUnavailable."""
    subject = _subject(kind, value)
    keys = _keys(namespace, subject)
    expected = _code_hash(namespace, subject, (code or "").strip())
    try:
        status, number = _redis().eval(
            _ATTEMPT_SCRIPT,
            3,
            keys["lock"],
            keys["code"],
            keys["attempts"],
            expected,
            settings.IDENTITY_OTP_TTL_SECONDS,
            settings.IDENTITY_OTP_MAX_ATTEMPTS,
            settings.IDENTITY_OTP_LOCKOUT_SECONDS,
        )
    except redis.RedisError:
        raise OtpStoreUnavailable() from None
    status = status.decode() if isinstance(status, bytes) else status
    if status == "OK":
        return
    if status == "LOCKED":
        raise OtpRejected(
            "Too many wrong codes; this identifier is locked for a while.", code="OTP_LOCKED", wait_seconds=max(int(number), 1)
        )
    if status == "WRONG":
        raise OtpInvalid(extra={"attemptsRemaining": int(number)})
    raise OtpInvalid()
