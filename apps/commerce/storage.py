"""Product media in object storage (S3 API; SeaweedFS here): a private bucket, objects written and
read only by commerce, downloads by short-lived presigned URL or streamed through the API."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings

from merchant_platform.errors import ServiceUnavailable
from merchant_platform.logging import get_logger
from merchant_platform.storage import ensure_bucket, s3_client

log = get_logger(__name__)

# Image types accepted, by their leading bytes (the declared content type is not trusted).
SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),  # RIFF....WEBP
)


def sniff_image_type(head: bytes) -> str | None:
    """The image type the bytes are, or None when they are no image type accepted here."""
    for signature, offset, content_type in SIGNATURES:
        if head[offset : offset + len(signature)] == signature and (offset == 0 or head[:4] == b"RIFF"):
            return content_type
    return None


def client():
    return s3_client(read_timeout=10)


def _unavailable(exc: Exception, operation: str) -> ServiceUnavailable:
    log.error("commerce.storage_failed", operation=operation, error=type(exc).__name__)
    return ServiceUnavailable("Object storage is unavailable; try again later.", code="STORAGE_UNAVAILABLE")


def _ensure_bucket(bucket: str) -> None:
    ensure_bucket(bucket, read_timeout=10)


def put_object(key: str, data: bytes, content_type: str) -> None:
    bucket = settings.COMMERCE_MEDIA_BUCKET
    try:
        _ensure_bucket(bucket)
        client().put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
    except (BotoCoreError, ClientError) as exc:
        raise _unavailable(exc, "put") from None


def delete_object(key: str) -> None:
    try:
        client().delete_object(Bucket=settings.COMMERCE_MEDIA_BUCKET, Key=key)
    except (BotoCoreError, ClientError) as exc:
        raise _unavailable(exc, "delete") from None


def open_object(key: str):
    """The object's body as a stream (iter_chunks) and its length."""
    try:
        found = client().get_object(Bucket=settings.COMMERCE_MEDIA_BUCKET, Key=key)
    except (BotoCoreError, ClientError) as exc:
        raise _unavailable(exc, "get") from None
    return found["Body"], found["ContentLength"]


def presigned_url(key: str, content_type: str) -> str:
    return client().generate_presigned_url(
        "get_object",
        Params={"Bucket": settings.COMMERCE_MEDIA_BUCKET, "Key": key, "ResponseContentType": content_type},
        ExpiresIn=settings.COMMERCE_MEDIA_URL_TTL_SECONDS,
    )
