"""Writes of provider integrations, with their credentials sealed."""

from __future__ import annotations

import json

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction

from apps.commerce import selectors
from apps.commerce.models import Merchant
from apps.commerce.services.records import apply_changes, summary_changed
from merchant_platform import outbound
from merchant_platform.errors import Conflict, InvalidInput, NotFound
from merchant_platform.integrations import seal_credential
from merchant_platform.models import Configuration

# --- Provider integrations ------------------------------------------------------------------------
# Configuration rows of group INTEGRATION whose principal is the merchant, in the shared `public`
# schema (written through `default`); the credential is sealed by merchant_platform.integrations.

POLICY_DB = "default"
SETTINGS_MAX_BYTES = 4096


def _integration_exists() -> Conflict:
    return Conflict("The merchant already has an integration with this code in this environment.", code="INTEGRATION_EXISTS")


def _check_settings(value) -> None:
    if not isinstance(value, dict):
        raise InvalidInput({"settings": "Give a JSON object."})
    if len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) > SETTINGS_MAX_BYTES:
        raise InvalidInput({"settings": f"At most {SETTINGS_MAX_BYTES} bytes of JSON."})
    if "endpoint" in value:
        # The provider's base URL payment calls: a merchant's URL, under the outbound guard.
        endpoint = value["endpoint"]
        try:
            if not isinstance(endpoint, str):
                raise outbound.RefusedUrl("Give an http(s) URL.")
            outbound.check_url(endpoint, allow_private=django_settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS)
        except outbound.RefusedUrl as exc:
            raise InvalidInput({"settings.endpoint": str(exc)}) from None


def _seal(configuration: Configuration, credential: str) -> None:
    configuration.credential, configuration.credential_mask = seal_credential(configuration_id=configuration.id, credential=credential)


def integration_create(
    *,
    merchant_id: int,
    code: str,
    credential: str,
    environment: str = Configuration.Environment.SANDBOX,
    status: str = Configuration.Status.ACTIVE,
    name: str = "",
    settings: dict | None = None,
    created_by: int | None = None,
) -> Configuration:
    settings = {} if settings is None else settings
    _check_settings(settings)
    if not Merchant.objects.filter(pk=merchant_id).exists():
        raise NotFound("No merchant has this id.")
    configuration = Configuration(
        group=Configuration.Group.INTEGRATION,
        principal_type=Configuration.PrincipalType.MERCHANT,
        principal_id=merchant_id,
        code=code,
        name=name,
        environment=environment,
        status=status,
        settings=settings,
        created_by=created_by,
    )
    _seal(configuration, credential)
    try:
        with transaction.atomic(using=POLICY_DB):
            configuration.save(using=POLICY_DB, force_insert=True)
            summary_changed(merchant_id, using=POLICY_DB)
    except IntegrityError:
        raise _integration_exists() from None
    return configuration


def integration_update(*, integration_id: int, **changes) -> Configuration:
    """Change an integration's name, status, environment, settings, or replace its credential (which
    is write-only: it is sealed again, never read back)."""
    allowed = {"name", "status", "environment", "settings", "credential"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    if "settings" in changes:
        _check_settings(changes["settings"])
    credential = changes.pop("credential", None)
    with transaction.atomic(using=POLICY_DB):
        configuration = selectors.integrations().select_for_update().filter(pk=integration_id).first()
        if configuration is None:
            raise NotFound("No integration has this id.")
        fields = apply_changes(configuration, changes)
        if credential is not None:
            _seal(configuration, credential)
            fields += ["credential", "credential_mask"]
        if fields:
            try:
                with transaction.atomic(using=POLICY_DB):
                    configuration.save(using=POLICY_DB, update_fields=[*fields, "updated_at"])
            except IntegrityError:
                raise _integration_exists() from None
            summary_changed(configuration.principal_id, using=POLICY_DB)
    return configuration


def integration_delete(*, integration_id: int) -> None:
    with transaction.atomic(using=POLICY_DB):
        configuration = selectors.integrations().select_for_update().filter(pk=integration_id).first()
        if configuration is None:
            raise NotFound("No integration has this id.")
        configuration.delete(using=POLICY_DB)
        summary_changed(configuration.principal_id, using=POLICY_DB)
