"""Every write of the outreach service.

Public callers (submit, subscribe, confirm, unsubscribe) get functions that do a bounded amount of
work and, for subscribers, return nothing: whether an address or a token was known never reaches
the caller. Side effects (the WebSocket notification, subscription mail) run after the commit.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.outreach import mail, metrics
from apps.outreach.models import Inquiry, Subscriber
from merchant_platform.errors import Conflict, NotFound
from merchant_platform.realtime import broadcast_many

DB = "outreach"

# Observation rooms (spec 6.2): every inquiry goes to the platform room, and to its merchant's room
# when it concerns one. Anyone may join a room (spec 5), so the payload carries no personal data.
INQUIRY_ROOM = "outreach.inquiries"
INQUIRY_SENT_EVENT = "inquiry.sent"

TOKEN_BYTES = 32  # 256 random bits: 43 URL-safe characters


def merchant_inquiry_room(merchant_id: int) -> str:
    return f"{INQUIRY_ROOM}.merchant.{merchant_id}"


def new_token() -> tuple[str, str]:
    """A fresh unsubscribeToken and the hash stored in its place."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    return token, hash_token(token)


def hash_token(token: str) -> str:
    """SHA-256 is enough for a 256-bit random token: nobody can invert it or guess a preimage, and
    unlike a key under APP_ENV_APPLICATION_SECRET it survives a rotation of that secret."""
    return hashlib.sha256(token.encode()).hexdigest()


def normalize_email(email: str) -> str:
    return email.strip().lower()


# --- Inquiries ------------------------------------------------------------------------------------


def inquiry_submit(*, name: str, email: str, subject: str, message: str, phone: str = "", merchant_id: int | None = None) -> Inquiry:
    """Store a public inquiry as SENT and notify the observation rooms once it is committed.

    One INSERT is its own transaction in autocommit mode, so there is no atomic block here: BEGIN and
    COMMIT would add two database round trips to the busiest public endpoint (docs/performance.md).
    `broadcast_many` then sends right after the INSERT (both rooms in one Redis round trip); inside a
    caller's transaction it waits for that transaction's commit instead."""
    inquiry = Inquiry(
        name=name, email=email, phone=phone, subject=subject, message=message, merchant_id=merchant_id, status=Inquiry.Status.SENT
    )
    inquiry.save(force_insert=True, using=DB)
    payload = {
        "id": str(inquiry.id),
        "status": inquiry.status,
        "merchantId": str(merchant_id) if merchant_id is not None else None,
        "createdAt": inquiry.created_at.isoformat(),
    }
    rooms = (INQUIRY_ROOM,) if merchant_id is None else (INQUIRY_ROOM, merchant_inquiry_room(merchant_id))
    broadcast_many(rooms, INQUIRY_SENT_EVENT, payload, using=DB)
    metrics.INQUIRIES.inc()
    return inquiry


def inquiry_update(*, inquiry_id: int, status: str) -> Inquiry:
    """The operator's only change to an inquiry: SENT -> CANCELLED marks it spam (spec 3.2). What
    the sender wrote is never edited, and a cancelled inquiry stays cancelled."""
    with transaction.atomic(using=DB):
        inquiry = _locked(Inquiry, inquiry_id)
        if inquiry.status == status:
            return inquiry
        if not (inquiry.status == Inquiry.Status.SENT and status == Inquiry.Status.CANCELLED):
            raise Conflict(f"An inquiry cannot go from {inquiry.status} to {status}.", code="INQUIRY_TRANSITION_NOT_ALLOWED")
        inquiry.status = status
        inquiry.save(update_fields=["status", "updated_at"])
    return inquiry


def inquiry_delete(*, inquiry_id: int) -> None:
    with transaction.atomic(using=DB):
        _locked(Inquiry, inquiry_id).delete()


# --- Subscribers ----------------------------------------------------------------------------------


def _issue_token(subscriber: Subscriber, *, now) -> mail.SubscriberMessage:
    """Give `subscriber` a fresh token, set its state for the opt-in mode, and build the one message
    that carries the token; the caller sends it after the commit."""
    token, subscriber.token_hash = new_token()
    subscriber.last_mailed_at = now
    subscriber.unsubscribed_at = None
    if settings.OUTREACH_DOUBLE_OPT_IN:
        subscriber.status, subscriber.confirmed_at = Subscriber.Status.PENDING, None
        return mail.confirmation_message(subscriber_id=subscriber.id, email=subscriber.email, token=token)
    subscriber.status, subscriber.confirmed_at = Subscriber.Status.ACTIVE, now
    return mail.welcome_message(subscriber_id=subscriber.id, email=subscriber.email, token=token)


def _send_after_commit(message: mail.SubscriberMessage) -> None:
    transaction.on_commit(lambda: mail.send(message), using=DB)


def subscriber_subscribe(*, email: str, name: str = "") -> None:
    """Public subscribe. Idempotent: an ACTIVE address is left alone; a new, PENDING or UNSUBSCRIBED
    one gets a fresh token by mail (confirmation under double opt-in), at most once per cooldown per
    address. Nothing is returned, so the caller cannot tell these cases apart."""
    email = normalize_email(email)
    now = timezone.now()
    metrics.SUBSCRIBER_ACTIONS.labels(action="subscribe").inc()
    with transaction.atomic(using=DB):
        subscriber = Subscriber.objects.select_for_update().filter(email=email).first()
        if subscriber is None:
            subscriber = Subscriber(email=email, name=name)
            message = _issue_token(subscriber, now=now)
            try:
                with transaction.atomic(using=DB):
                    subscriber.save(force_insert=True)
            except IntegrityError:  # a concurrent request created it first: that one mails
                return
            _send_after_commit(message)
            return
        cooling_down = subscriber.last_mailed_at and now - subscriber.last_mailed_at < timedelta(
            seconds=settings.OUTREACH_MAIL_COOLDOWN_SECONDS
        )
        if subscriber.status == Subscriber.Status.ACTIVE or cooling_down:
            return
        if name:
            subscriber.name = name
        message = _issue_token(subscriber, now=now)
        subscriber.save()
        _send_after_commit(message)


def subscriber_confirm(*, token: str) -> None:
    """Double opt-in: a PENDING subscriber holding `token` becomes ACTIVE. One UPDATE, whatever the token."""
    metrics.SUBSCRIBER_ACTIONS.labels(action="confirm").inc()
    now = timezone.now()
    with transaction.atomic(using=DB):
        Subscriber.objects.filter(token_hash=hash_token(token), status=Subscriber.Status.PENDING).update(
            status=Subscriber.Status.ACTIVE, confirmed_at=now, updated_at=now
        )


def subscriber_unsubscribe(*, token: str) -> None:
    """Deactivate the subscriber holding `token`; an unknown token changes nothing. One UPDATE."""
    metrics.SUBSCRIBER_ACTIONS.labels(action="unsubscribe").inc()
    now = timezone.now()
    with transaction.atomic(using=DB):
        Subscriber.objects.filter(token_hash=hash_token(token)).exclude(status=Subscriber.Status.UNSUBSCRIBED).update(
            status=Subscriber.Status.UNSUBSCRIBED, unsubscribed_at=now, updated_at=now
        )


def subscriber_create(*, email: str, name: str = "", created_by: int | None = None) -> Subscriber:
    """An operator adds an address. It follows the same opt-in rule as a public subscription (the
    address owner still confirms under double opt-in), but an existing address is a conflict."""
    email = normalize_email(email)
    now = timezone.now()
    with transaction.atomic(using=DB):
        if Subscriber.objects.filter(email=email).exists():
            raise Conflict("This address is already a subscriber.", code="SUBSCRIBER_EXISTS")
        subscriber = Subscriber(email=email, name=name, created_by=created_by)
        message = _issue_token(subscriber, now=now)
        try:
            with transaction.atomic(using=DB):
                subscriber.save(force_insert=True)
        except IntegrityError:
            raise Conflict("This address is already a subscriber.", code="SUBSCRIBER_EXISTS") from None
        _send_after_commit(message)
    return subscriber


def subscriber_update(*, subscriber_id: int, name: str | None = None, status: str | None = None) -> Subscriber:
    """Operators may rename a subscriber and unsubscribe it; only the address owner (through the
    token) may subscribe it again, so no other status change is allowed here."""
    with transaction.atomic(using=DB):
        subscriber = _locked(Subscriber, subscriber_id)
        if status is not None and status != subscriber.status:
            if status != Subscriber.Status.UNSUBSCRIBED:
                raise Conflict(
                    f"A subscriber cannot go from {subscriber.status} to {status}; only the address owner can subscribe.",
                    code="SUBSCRIBER_TRANSITION_NOT_ALLOWED",
                )
            subscriber.status, subscriber.unsubscribed_at = status, timezone.now()
        if name is not None:
            subscriber.name = name
        subscriber.save(update_fields=["name", "status", "unsubscribed_at", "updated_at"])
    return subscriber


def subscriber_delete(*, subscriber_id: int) -> None:
    with transaction.atomic(using=DB):
        _locked(Subscriber, subscriber_id).delete()


def _locked(model, pk: int):
    instance = model.objects.select_for_update().filter(pk=pk).first()
    if instance is None:
        raise NotFound(f"No {model._meta.verbose_name} has this id.")
    return instance
