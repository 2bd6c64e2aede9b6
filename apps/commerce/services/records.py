"""What the writes of commerce share: the database alias, checks of currencies, amounts and attributes,
locking and saving a row, and the bookkeeping after a commit that changes the summary or the catalog."""

from __future__ import annotations

import json

from django.db import IntegrityError, transaction

from apps.commerce.codes import CURRENCIES
from apps.commerce.models import ATTRIBUTES_MAX_BYTES
from apps.commerce.services import caches
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.money import AMOUNT_TOO_LARGE, MAX_AMOUNT

DB = "commerce"
SOURCE = "commerce"  # the policy rows commerce writes name it


def locked(model, pk: int):
    instance = model.objects.select_for_update().filter(pk=pk).first()
    if instance is None:
        raise NotFound(f"No {model._meta.verbose_name} has this id.")
    return instance


def check_currency(field: str, value: str) -> None:
    if value not in CURRENCIES:
        raise InvalidInput({field: "Give an ISO 4217 currency code, such as EUR."})


def amount_too_large(field: str, what: str) -> ApiError:
    """400 AMOUNT_TOO_LARGE naming `field` (also as the one entry of `errors`, like a validation error)."""
    message = f"{what} is over {MAX_AMOUNT} minor units."
    return ApiError(
        message,
        code=AMOUNT_TOO_LARGE,
        status_code=400,
        extra={"field": field, "maximum": MAX_AMOUNT, "errors": [{"field": field, "code": AMOUNT_TOO_LARGE, "message": message}]},
    )


def check_amount(field: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidInput({field: "Give a whole, non-negative number of minor units."})
    if value is not None and value > MAX_AMOUNT:
        raise amount_too_large(field, field)


def check_attributes(value) -> None:
    if not isinstance(value, dict):
        raise InvalidInput({"attributes": "Give a JSON object."})
    if len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) > ATTRIBUTES_MAX_BYTES:
        raise InvalidInput({"attributes": f"At most {ATTRIBUTES_MAX_BYTES} bytes of JSON."})


def apply_changes(instance, changes: dict) -> list[str]:
    fields = []
    for name, value in changes.items():
        if getattr(instance, name) != value:
            setattr(instance, name, value)
            fields.append(name)
    return fields


def summary_changed(merchant_id: int, *, using: str = DB) -> None:
    """The merchant's footer summary changes when this transaction commits."""
    transaction.on_commit(lambda: caches.summary_retire(merchant_id), using=using)


def catalog_changed(merchant_id: int) -> None:
    """A product or variant changed: the summary, and the search index until the worker syncs it."""
    summary_changed(merchant_id)
    transaction.on_commit(caches.search_changed, using=DB)


def save_fields(instance, fields: list[str], *, conflict: Conflict) -> None:
    if not fields:
        return
    try:
        with transaction.atomic(using=DB):
            instance.save(using=DB, update_fields=[*fields, "updated_at"])
    except IntegrityError:
        raise conflict from None
