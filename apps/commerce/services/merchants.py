"""Writes of merchants: creation (the creator joins the merchant's tenant), edits, deletion and restore."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from apps.commerce.codes import COUNTRIES
from apps.commerce.models import Merchant, Product
from apps.commerce.services.records import DB, apply_changes, check_currency, locked, save_fields
from merchant_platform import policy
from merchant_platform.errors import Conflict, InvalidInput, NotFound

# --- Merchants ------------------------------------------------------------------------------------


def _slug_taken() -> Conflict:
    return Conflict("Another merchant has this slug.", code="MERCHANT_SLUG_TAKEN")


def _check_merchant(changes: dict) -> None:
    if "default_currency" in changes:
        check_currency("defaultCurrency", changes["default_currency"])
    if "country" in changes and changes["country"] not in COUNTRIES:
        raise InvalidInput({"country": "Give an ISO 3166-1 alpha-2 country code, such as FR."})


def merchant_create(
    *,
    name: str,
    slug: str,
    default_currency: str,
    country: str,
    legal_name: str = "",
    timezone: str = "UTC",
    status: str = Merchant.Status.ACTIVE,
    created_by: int | None = None,
) -> Merchant:
    """Create a merchant and make its creator a member of it (a `join_domain` policy, spec 5), so
    the creator reaches the merchant and, with its roles, the merchant's records in every service.
    The membership commits first (policies live on `default`): if the merchant's own commit then
    failed, a membership of a merchant that does not exist grants nothing."""
    _check_merchant({"default_currency": default_currency, "country": country})
    merchant = Merchant(
        name=name,
        slug=slug,
        legal_name=legal_name,
        default_currency=default_currency,
        country=country,
        timezone=timezone,
        status=status,
        created_by=created_by,
    )
    with transaction.atomic(using=DB):
        try:
            with transaction.atomic(using=DB):
                merchant.save(using=DB, force_insert=True)
        except IntegrityError:
            raise _slug_taken() from None
        if created_by is not None:
            policy.policy_join_domain(user_id=created_by, domain=merchant.id, source=policy.MERCHANT_CREATE_SOURCE)
    return merchant


def merchant_update(*, merchant_id: int, **changes) -> Merchant:
    """Change a merchant's name, slug, legal name, default currency, country, timezone or status."""
    allowed = {"name", "slug", "legal_name", "default_currency", "country", "timezone", "status"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    _check_merchant(changes)
    with transaction.atomic(using=DB):
        merchant = locked(Merchant, merchant_id)
        save_fields(merchant, apply_changes(merchant, changes), conflict=_slug_taken())
    return merchant


def merchant_delete(*, merchant_id: int) -> None:
    """Soft-delete a merchant that has no live products (delete those first): a merchant's records
    in other services hang from it, so it is never removed with its catalog in one stroke."""
    with transaction.atomic(using=DB):
        merchant = locked(Merchant, merchant_id)
        if Product.objects.filter(merchant_id=merchant.id).exists():
            raise Conflict("Delete the merchant's products first.", code="MERCHANT_NOT_EMPTY")
        merchant.delete(using=DB)


def merchant_restore(*, merchant_id: int) -> Merchant:
    """Bring a soft-deleted merchant back (an operator action); its slug must be free again."""
    with transaction.atomic(using=DB):
        merchant = Merchant.all_objects.select_for_update().filter(pk=merchant_id).first()
        if merchant is None:
            raise NotFound("No merchant has this id.")
        if merchant.deleted_at is not None:
            merchant.deleted_at = None
            save_fields(merchant, ["deleted_at"], conflict=_slug_taken())
    return merchant
