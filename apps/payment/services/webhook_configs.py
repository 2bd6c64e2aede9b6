"""Webhook configs (spec 2.1 WebhookConfig, 5): a merchant's subscriptions to payment events, their
sealed signing secrets, and the platform services' own (`internal`) that users may not change."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.payment import events, webhooks
from apps.payment.models import WebhookConfig, WebhookDelivery
from apps.payment.services.records import DB
from merchant_platform import crypto, outbound
from merchant_platform.errors import ApiError, InvalidInput, NotFound

MAX_RETRIES_LIMIT = 20


def _check_webhook(changes: dict, *, internal: bool = False) -> None:
    if "url" in changes:
        try:
            webhooks.check_url(changes["url"], internal=internal)
        except outbound.RefusedUrl as exc:
            raise InvalidInput({"url": str(exc)}) from None
    if "event_types" in changes:
        unknown = sorted(set(changes["event_types"]) - set(events.EVENT_TYPES) - {"*"})
        if unknown or not changes["event_types"]:
            raise InvalidInput({"eventTypes": f"Name one or more of {', '.join(events.EVENT_TYPES)} (or *)."})
    retries = (changes.get("metadata") or {}).get("maxRetries")
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES_LIMIT):
        raise InvalidInput({"metadata": f"maxRetries must be an integer from 0 to {MAX_RETRIES_LIMIT}."})


def _seal_secret(config_id: int, secret: str) -> str:
    return crypto.encrypt(secret, purpose=WebhookConfig.SECRET_PURPOSE, associated_data=str(config_id).encode())


def webhook_create(
    *,
    merchant_id: int,
    name: str,
    url: str,
    event_types: list[str],
    status: str = WebhookConfig.Status.ACTIVE,
    metadata: dict | None = None,
    created_by: int | None = None,
    internal: bool = False,
) -> tuple[WebhookConfig, str]:
    """A webhook config and its signing secret (`whsec_...`): returned here once, stored sealed.
    `internal`: made by a platform service, so its URL must be one of the platform's own receivers
    (private addresses allowed: WebhookConfig.internal)."""
    metadata = dict(metadata or {})
    _check_webhook({"url": url, "event_types": event_types, "metadata": metadata}, internal=internal)
    metadata.setdefault("maxRetries", settings.PAYMENT_WEBHOOK_DEFAULT_MAX_RETRIES)
    secret = webhooks.new_secret()
    with transaction.atomic(using=DB):
        config = WebhookConfig(
            merchant_id=merchant_id,
            name=name,
            url=url,
            event_types=event_types,
            status=status,
            metadata=metadata,
            created_by=created_by,
            internal=internal,
        )
        config.secret = ""
        config.save(using=DB, force_insert=True)
        config.secret = _seal_secret(config.id, secret)
        config.save(using=DB, update_fields=["secret"])
    return config, secret


def refuse_platform_owned(config: WebhookConfig, *, by_user: bool) -> None:
    """A platform service's subscription (`internal`) is not a user's to change, delete or replay
    (the API hides it from users; this holds for any other caller too)."""
    if by_user and config.internal:
        raise ApiError(
            "This webhook belongs to the platform; it cannot be changed by a user.", code="WEBHOOK_PLATFORM_OWNED", status_code=403
        )


def _locked_webhook(webhook_id: int, *, by_user: bool) -> WebhookConfig:
    config = WebhookConfig.objects.using(DB).select_for_update().filter(pk=webhook_id).first()
    if config is None:
        raise NotFound("No webhook has this id.")
    refuse_platform_owned(config, by_user=by_user)
    return config


def webhook_update(*, webhook_id: int, by_user: bool = False, **changes) -> WebhookConfig:
    """Change a config (`by_user`: a user's request, refused for a platform service's config)."""
    with transaction.atomic(using=DB):
        config = _locked_webhook(webhook_id, by_user=by_user)
        _check_webhook(changes, internal=config.internal)
        if "metadata" in changes:
            changes["metadata"] = {**config.metadata, **changes["metadata"]}
        for name, value in changes.items():
            setattr(config, name, value)
        config.save(using=DB, update_fields=[*changes, "updated_at"])
    return config


def webhook_delete(*, webhook_id: int, by_user: bool = False) -> None:
    """Soft-delete the config; its pending deliveries are not sent any more."""
    with transaction.atomic(using=DB):
        config = _locked_webhook(webhook_id, by_user=by_user)
        config.delete(using=DB)
        WebhookDelivery.objects.using(DB).filter(webhook_id=webhook_id, status=WebhookDelivery.Status.PENDING).update(
            status=WebhookDelivery.Status.FAILED, last_error="webhook deleted", next_attempt_at=None, updated_at=timezone.now()
        )
