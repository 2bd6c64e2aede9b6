"""Every write of identity: accounts, sign-in, tokens, one-time passwords."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError
from redis import RedisError

from apps.identity import delivery, guard, identifiers, otp, passwords, selectors, tokens
from apps.identity.models import RefreshToken, User
from merchant_platform import revocation
from merchant_platform.celery import IDENTITY_MAIL_QUEUE, send_task_on_commit
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger

DB = "identity"
log = get_logger(__name__)

ROTATED, SIGNED_OUT, REUSED = "rotated", "signed_out", "reuse_detected"
PASSWORD_CHANGED, DEACTIVATED = "password_changed", "deactivated"
MAX_PASSWORD_LENGTH = 256


class InvalidCredentials(ApiError):
    status_code = 401
    default_code = "INVALID_CREDENTIALS"
    default_detail = "The identifier or the password is wrong."


class IdentifierUnverified(ApiError):
    status_code = 403
    default_code = "IDENTIFIER_UNVERIFIED"
    default_detail = (
        "Nobody has verified this email address or phone number yet, so it cannot sign in. Sign in with another "
        "identifier, verify the email address, or reset the password through this identifier (forgot-password)."
    )


class RefreshTokenInvalid(ApiError):
    status_code = 401
    default_code = "REFRESH_TOKEN_INVALID"
    default_detail = "The refresh token is unknown, expired or revoked; sign in again."


@dataclass(frozen=True)
class TokenPair:
    user: User
    access_token: str
    expires_in: int
    refresh_token: str
    refresh_expires_in: int


# --- Helpers --------------------------------------------------------------------------------------


def validate_password(password: str, *, field: str = "password", user_identifiers: tuple[str | None, ...] = ()) -> None:
    problem = None
    if len(password) < settings.IDENTITY_PASSWORD_MIN_LENGTH:
        problem = f"Use at least {settings.IDENTITY_PASSWORD_MIN_LENGTH} characters."
    elif len(password) > MAX_PASSWORD_LENGTH:
        problem = f"Use at most {MAX_PASSWORD_LENGTH} characters."
    elif password.casefold() in {value.casefold() for value in user_identifiers if value}:
        problem = "The password cannot be one of your identifiers."
    if problem:
        raise InvalidInput({field: [problem]})


def _issue_pair(user: User, *, family: uuid.UUID | None = None) -> TokenPair:
    refresh_token, digest = tokens.new_refresh_secret()
    lifetime = settings.IDENTITY_REFRESH_TOKEN_TTL_SECONDS
    RefreshToken.objects.using(DB).create(
        user=user, token_hash=digest, family=family or uuid.uuid4(), expires_at=timezone.now() + timedelta(seconds=lifetime)
    )
    access_token, expires_in = tokens.issue_access_token(user.pk)
    return TokenPair(user=user, access_token=access_token, expires_in=expires_in, refresh_token=refresh_token, refresh_expires_in=lifetime)


def _lock_user(user_id: int) -> User | None:
    """Lock the account's row. Every write that issues or revokes a user's tokens (refresh,
    sign-out, password change or reset, deactivation) takes it first, so they run one after the
    other: a refresh can no longer commit a new token after a revocation's UPDATE has looked."""
    return User.objects.using(DB).select_for_update().filter(pk=user_id).first()


def _end_every_session(user: User, *, reason: str, instant) -> None:
    """Revoke every refresh token and refuse every token issued before `instant`, on every service
    at once (merchant_platform.revocation). The caller holds the user's row lock."""
    revocation.tokens_valid_after_move(user_id=user.pk, instant=instant)
    RefreshToken.objects.using(DB).filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now(), revoked_reason=reason)


def _normalized(value: str | None, normalize) -> str | None:
    if value is None or not str(value).strip():
        return None
    return normalize(value)


# --- Accounts and sign-in -------------------------------------------------------------------------


def user_sign_up(*, password: str, email: str | None = None, phone: str | None = None, username: str | None = None) -> TokenPair:
    """Create an account with at least one identifier and sign it in."""
    values = {}
    errors = {}
    for field, raw, normalize in (
        ("email", email, identifiers.normalize_email),
        ("phone", phone, identifiers.normalize_phone),
        ("username", username, identifiers.normalize_username),
    ):
        try:
            values[field] = _normalized(raw, normalize)
        except identifiers.InvalidIdentifier as exc:
            errors[field] = [str(exc)]
    if errors:
        raise InvalidInput(errors)
    if not any(values.values()):
        raise InvalidInput({"identifier": ["Give an email, a phone number or a username."]})
    validate_password(password, user_identifiers=tuple(values.values()))
    password_hash = passwords.hash_password(password)
    try:
        with transaction.atomic(using=DB):
            user = User.objects.using(DB).create(password_hash=password_hash, password_changed_at=timezone.now(), **values)
            pair = _issue_pair(user)
    except IntegrityError as exc:
        taken = next((field for field in ("email", "phone", "username") if f"user_{field}_unique_alive" in str(exc)), "identifier")
        raise Conflict(f"This {taken} belongs to another account.", code="IDENTIFIER_TAKEN", extra={"field": taken}) from None
    log.info("identity.user_signed_up", userId=str(user.pk))
    return pair


def user_sign_in(*, identifier: str, password: str, ip: str) -> TokenPair:
    """Password sign-in by email, phone or username, guarded against brute force (identity.guard)."""
    try:
        parsed = identifiers.parse_identifier(identifier)
    except identifiers.InvalidIdentifier:
        parsed = identifiers.Identifier(identifiers.USERNAME, (identifier or "").strip().casefold()[:64])
    key = guard.identifier_digest(parsed.kind, parsed.value)
    guard.check(key, ip)
    user = selectors.user_by_identifier(parsed.kind, parsed.value)
    matches = passwords.verify_password(user.password_hash if user else None, password[:MAX_PASSWORD_LENGTH])
    if not (matches and user.is_active):
        guard.record_failure(key, ip)
        log.info("identity.sign_in_failed", channel=parsed.kind)
        raise InvalidCredentials()
    guard.record_success(key, ip)
    if not selectors.identifier_verified(user, parsed.kind):
        # Account pre-hijack: whoever typed an email or a phone number at sign-up may not own it.
        log.info("identity.sign_in_unverified_identifier", userId=str(user.pk), channel=parsed.kind)
        raise IdentifierUnverified()
    with transaction.atomic(using=DB):
        # A password change or a deactivation that committed since the check above wins.
        locked = _lock_user(user.pk)
        if locked is None or not locked.is_active or locked.password_hash != user.password_hash:
            raise InvalidCredentials()
        user = locked
        user.last_sign_in_at = timezone.now()
        fields = ["last_sign_in_at", "updated_at"]
        if passwords.needs_rehash(user.password_hash):
            user.password_hash = passwords.hash_password(password)
            fields.append("password_hash")
        user.save(using=DB, update_fields=fields)
        pair = _issue_pair(user)
    log.info("identity.user_signed_in", userId=str(user.pk), channel=parsed.kind)
    return pair


def _pair_fields(pair: TokenPair) -> dict:
    return {
        "access_token": pair.access_token,
        "expires_in": pair.expires_in,
        "refresh_token": pair.refresh_token,
        "refresh_expires_in": pair.refresh_expires_in,
    }


def _within_grace(row: RefreshToken) -> TokenPair | None:
    """The pair that rotating `row` produced, when `row` was rotated less than
    IDENTITY_REFRESH_REUSE_GRACE_SECONDS ago and that pair's refresh token is still the live one of
    the family (neither rotated nor revoked since); else None (then it is reuse)."""
    grace = settings.IDENTITY_REFRESH_REUSE_GRACE_SECONDS
    if row.revoked_reason != ROTATED or row.revoked_at < timezone.now() - timedelta(seconds=grace):
        return None
    remembered = tokens.remembered_rotation(row.token_hash)
    if remembered is None:
        return None
    successor = (
        RefreshToken.objects.using(DB)
        .filter(token_hash=tokens.refresh_digest(remembered["refresh_token"]), family=row.family, revoked_at__isnull=True)
        .filter(expires_at__gt=timezone.now())
        .exists()
    )
    return TokenPair(user=row.user, **remembered) if successor else None


def token_refresh(*, refresh_token: str) -> TokenPair:
    """Rotate a refresh token. A token used twice means it was copied: its whole family is revoked,
    except within the short grace after its rotation, where it yields the same new pair again
    (two tabs refreshing at once)."""
    digest = tokens.refresh_digest(refresh_token or "")
    user_id = RefreshToken.objects.using(DB).filter(token_hash=digest).values_list("user_id", flat=True).first()
    if user_id is None:
        raise RefreshTokenInvalid()
    reused = False
    with transaction.atomic(using=DB):
        user = _lock_user(user_id)
        row = RefreshToken.objects.using(DB).select_for_update().filter(token_hash=digest).first()
        if user is None or row is None:
            raise RefreshTokenInvalid()
        row.user = user
        if row.revoked_at is not None:
            if row.revoked_reason == ROTATED:
                again = _within_grace(row) if user.is_active else None
                if again is not None:
                    log.info("identity.refresh_token_replayed_in_grace", userId=str(row.user_id), family=str(row.family))
                    return again
                reused = True
                RefreshToken.objects.using(DB).filter(family=row.family, revoked_at__isnull=True).update(
                    revoked_at=timezone.now(), revoked_reason=REUSED
                )
        elif (
            row.expires_at > timezone.now() and user.is_active and not revocation.issued_before_cutoff(user.pk, row.created_at.timestamp())
        ):
            row.revoked_at, row.revoked_reason = timezone.now(), ROTATED
            row.save(using=DB, update_fields=["revoked_at", "revoked_reason", "updated_at"])
            pair = _issue_pair(user, family=row.family)
            # Stored before the commit: a concurrent refresh waiting on this row's lock finds it.
            tokens.remember_rotation(digest, _pair_fields(pair))
            return pair
    if reused:
        log.warning("identity.refresh_token_reused", userId=str(user_id), family=str(row.family))
    raise RefreshTokenInvalid()


def session_sign_out(*, refresh_token: str) -> None:
    """Revoke the refresh token and the rest of its family (the session). Unknown tokens are ignored."""
    digest = tokens.refresh_digest(refresh_token or "")
    row = RefreshToken.objects.using(DB).filter(token_hash=digest).first()
    if row is None:
        return
    with transaction.atomic(using=DB):
        _lock_user(row.user_id)  # a refresh of this family in flight commits first, and is revoked here
        RefreshToken.objects.using(DB).filter(family=row.family, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_reason=SIGNED_OUT
        )


def _set_password(user: User, password: str) -> None:
    """Store a new password and end every session; the caller holds the user's row lock."""
    password_hash = passwords.hash_password(password)
    now = timezone.now()
    user.password_hash, user.password_changed_at = password_hash, now
    user.save(using=DB, update_fields=["password_hash", "password_changed_at", "updated_at"])
    _end_every_session(user, reason=PASSWORD_CHANGED, instant=now)


def user_change_password(*, user: User, current_password: str, new_password: str, ip: str) -> TokenPair:
    """Change the password, end every other session, and hand this client a new token pair.

    The current password is checked under the sign-in guard (per account and per client IP), so a
    stolen access token cannot be used to guess it."""
    key = guard.identifier_digest("account", str(user.pk))
    guard.check(key, ip)
    if not passwords.verify_password(user.password_hash, current_password[:MAX_PASSWORD_LENGTH]):
        guard.record_failure(key, ip)
        log.info("identity.password_check_failed", userId=str(user.pk))
        raise ApiError("The current password is wrong.", code="CURRENT_PASSWORD_WRONG", status_code=400)
    guard.record_success(key, ip)
    validate_password(new_password, field="newPassword", user_identifiers=(user.email, user.phone, user.username))
    with transaction.atomic(using=DB):
        locked = _lock_user(user.pk)
        if locked is None or not locked.is_active:
            raise NotFound("The account of this token no longer exists.")
        if locked.password_hash != user.password_hash:  # changed meanwhile: the checked password is no longer current
            raise ApiError("The current password is wrong.", code="CURRENT_PASSWORD_WRONG", status_code=400)
        user = locked
        _set_password(user, new_password)
        pair = _issue_pair(user)
    log.info("identity.password_changed", userId=str(user.pk))
    return pair


def user_deactivate(*, user_id: int) -> User:
    """Deactivate an account: it can no longer sign in or refresh, and every token it holds is
    refused by every service at once."""
    with transaction.atomic(using=DB):
        user = _lock_user(user_id)
        if user is None:
            raise NotFound("No such account.")
        user.is_active = False
        user.save(using=DB, update_fields=["is_active", "updated_at"])
        _end_every_session(user, reason=DEACTIVATED, instant=timezone.now())
    log.info("identity.user_deactivated", userId=str(user_id))
    return user


def user_reactivate(*, user_id: int) -> User:
    """Let a deactivated account sign in again (its old tokens stay refused)."""
    with transaction.atomic(using=DB):
        user = _lock_user(user_id)
        if user is None:
            raise NotFound("No such account.")
        user.is_active = True
        user.save(using=DB, update_fields=["is_active", "updated_at"])
    log.info("identity.user_reactivated", userId=str(user_id))
    return user


def user_delete(*, user_id: int) -> None:
    """Soft-delete an account (its identifiers become free); its tokens are refused at once."""
    with transaction.atomic(using=DB):
        user = user_deactivate(user_id=user_id)
        user.delete(using=DB)
    log.info("identity.user_deleted", userId=str(user_id))


# --- One-time passwords ---------------------------------------------------------------------------

_CHANNELS = {
    otp.VERIFY_EMAIL: (identifiers.EMAIL,),
    otp.PHONE_AUTH: (identifiers.PHONE,),
    otp.FORGOT_PASSWORD: (identifiers.EMAIL, identifiers.PHONE),
}


def _otp_identifier(namespace: str, raw: str) -> identifiers.Identifier:
    try:
        parsed = identifiers.parse_identifier(raw)
    except identifiers.InvalidIdentifier as exc:
        raise InvalidInput({"identifier": [str(exc)]}) from None
    if parsed.kind not in _CHANNELS[namespace]:
        wanted = " or ".join("an email address" if kind == identifiers.EMAIL else "a phone number" for kind in _CHANNELS[namespace])
        raise InvalidInput({"identifier": [f"{namespace} codes go to {wanted}."]})
    return parsed


def otp_request(*, namespace: str, identifier: str) -> dict:
    """Issue and queue a code. The answer is the same whether or not an account has the identifier."""
    parsed = _otp_identifier(namespace, identifier)
    if parsed.kind == identifiers.EMAIL:
        delivery.ensure_mail_configured()
    else:
        delivery.ensure_sms_configured()
    code = otp.issue(namespace, parsed.kind, parsed.value)
    sealed = otp.seal(code, namespace, parsed.kind, parsed.value)
    try:
        send_task_on_commit(
            otp.DELIVERY_TASK,
            (namespace, parsed.kind, parsed.value, sealed),
            using=DB,
            queue=IDENTITY_MAIL_QUEUE,
            retry=False,
        )
    except (BrokerError, RedisError, OSError):
        raise otp.OtpStoreUnavailable() from None
    return {
        "namespace": namespace,
        "channel": "email" if parsed.kind == identifiers.EMAIL else "sms",
        "status": "ACCEPTED",
        "expiresIn": settings.IDENTITY_OTP_TTL_SECONDS,
        "resendAfter": settings.IDENTITY_OTP_RESEND_COOLDOWN_SECONDS,
    }


def _consume(namespace: str, identifier: str, code: str) -> tuple[identifiers.Identifier, User]:
    parsed = _otp_identifier(namespace, identifier)
    otp.consume(namespace, parsed.kind, parsed.value, code)
    user = selectors.user_for_otp(namespace, parsed.kind, parsed.value)
    if user is None:  # nobody received a code for this identifier: answer like a wrong code
        raise otp.OtpInvalid()
    return parsed, user


def otp_verify_email(*, identifier: str, code: str) -> User:
    _, user = _consume(otp.VERIFY_EMAIL, identifier, code)
    with transaction.atomic(using=DB):
        user.email_verified_at = timezone.now()
        user.save(using=DB, update_fields=["email_verified_at", "updated_at"])
    log.info("identity.email_verified", userId=str(user.pk))
    return user


def otp_phone_sign_in(*, identifier: str, code: str) -> TokenPair:
    """Sign in with a code sent by SMS, to an account whose phone number was verified. A code proves
    the caller holds the phone, not that the account is theirs: whoever created an account with an
    unverified number may hold its password, so such an account is reached by a password reset
    through the phone (which verifies the number and drops the other unverified identifiers)."""
    parsed, user = _consume(otp.PHONE_AUTH, identifier, code)
    if not selectors.identifier_verified(user, parsed.kind):
        log.info("identity.sign_in_unverified_identifier", userId=str(user.pk), channel="phone-otp")
        raise IdentifierUnverified()
    with transaction.atomic(using=DB):
        user = _lock_user(user.pk)
        if user is None or not user.is_active:
            raise otp.OtpInvalid()
        user.last_sign_in_at = timezone.now()
        user.save(using=DB, update_fields=["last_sign_in_at", "updated_at"])
        pair = _issue_pair(user)
    log.info("identity.user_signed_in", userId=str(user.pk), channel="phone-otp")
    return pair


def otp_reset_password(*, identifier: str, code: str, new_password: str) -> None:
    # The new password is checked first, so a weak one does not burn the code.
    validate_password(new_password, field="newPassword")
    parsed, user = _consume(otp.FORGOT_PASSWORD, identifier, code)
    validate_password(new_password, field="newPassword", user_identifiers=(user.email, user.phone, user.username))
    with transaction.atomic(using=DB):
        user = _lock_user(user.pk)
        if user is None or getattr(user, selectors.IDENTIFIER_FIELDS[parsed.kind]) != parsed.value:  # changed meanwhile
            raise otp.OtpInvalid()
        _set_password(user, new_password)
        # The code proved this channel. Another email or phone number nobody verified may be an
        # attacker's, set up before the owner came (account pre-hijack): it leaves the account.
        dropped = []
        if parsed.kind == identifiers.EMAIL:
            user.email_verified_at = user.email_verified_at or timezone.now()
            if user.phone and user.phone_verified_at is None:
                user.phone, dropped = None, ["phone"]
        else:
            user.phone_verified_at = user.phone_verified_at or timezone.now()
            if user.email and user.email_verified_at is None:
                user.email, dropped = None, ["email"]
        user.save(using=DB, update_fields=["email", "email_verified_at", "phone", "phone_verified_at", "updated_at"])
    log.info("identity.password_reset", userId=str(user.pk), droppedUnverified=",".join(dropped))
