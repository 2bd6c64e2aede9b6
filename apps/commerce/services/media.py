"""Writes of product media: uploads to S3, deletion and the sweep of deleted objects."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from apps.commerce import storage
from apps.commerce.models import Product, ProductMedia
from apps.commerce.services.records import DB, locked, summary_changed
from merchant_platform.errors import ApiError, InvalidInput, NotFound

# --- Media ----------------------------------------------------------------------------------------


def media_upload(*, product_id: int, data: bytes, filename: str = "", created_by: int | None = None) -> ProductMedia:
    """Store an image of a product: its type is sniffed from its bytes (JPEG, PNG, GIF or WebP, 415
    otherwise), its size bounded (413). The object is written before the row commits, so a failed
    upload leaves no row; a commit that fails after the upload leaves an object without a row."""
    limit = django_settings.COMMERCE_MEDIA_MAX_BYTES
    if not data:
        raise InvalidInput({"file": "The file is empty."})
    if len(data) > limit:
        raise ApiError(f"An image is at most {limit} bytes.", code="MEDIA_TOO_LARGE", status_code=413)
    content_type = storage.sniff_image_type(data[:16])
    if content_type is None:
        raise ApiError("Only JPEG, PNG, GIF and WebP images are accepted.", code="MEDIA_TYPE_NOT_ALLOWED", status_code=415)
    with transaction.atomic(using=DB):
        product = Product.objects.select_for_update().filter(pk=product_id).first()
        if product is None:
            raise NotFound("No product has this id.")
        media = ProductMedia(
            merchant_id=product.merchant_id,
            product_id=product.id,
            content_type=content_type,
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            filename=filename[:255],
            created_by=created_by,
        )
        media.object_key = f"merchants/{product.merchant_id}/products/{product.id}/{media.id}"
        storage.put_object(media.object_key, data, content_type)
        media.save(using=DB, force_insert=True)
        summary_changed(product.merchant_id)
    return media


def media_delete(*, media_id: int) -> None:
    """Soft-delete a media row; the object goes with the next sweep (media_sweep)."""
    with transaction.atomic(using=DB):
        media = locked(ProductMedia, media_id)
        media.delete(using=DB)
        summary_changed(media.merchant_id)


def media_sweep(*, grace_seconds: int, limit: int = 500) -> int:
    """Remove the objects of media deleted more than `grace_seconds` ago (the Celery beat task);
    idempotent: each row records when its object went. Returns how many objects were removed."""
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    doomed = ProductMedia.all_objects.filter(deleted_at__lt=cutoff, object_removed_at__isnull=True).order_by("pk")[:limit]
    removed = 0
    for media_id, key in doomed.values_list("id", "object_key"):
        storage.delete_object(key)  # deleting a missing object succeeds: a rerun is harmless
        ProductMedia.all_objects.filter(pk=media_id).update(object_removed_at=timezone.now())
        removed += 1
    return removed
