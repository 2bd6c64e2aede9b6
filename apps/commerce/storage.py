"""Product media in object storage (S3 API; SeaweedFS here): a private bucket, objects written and
read only by commerce, downloads by short-lived presigned URL or streamed through the API."""

from __future__ import annotations

import threading

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings

from merchant_platform.errors import ServiceUnavailable
from merchant_platform.logging import get_logger

log = get_logger(__name__)
_local = threading.local()
_bucket_ready: set[str] = set()

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
    """One S3 client per thread (boto3 clients are thread-safe, sessions are not)."""
    s3 = getattr(_local, "client", None)
    if s3 is None:
        s3 = _local.client = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.S3_ENDPOINT_URL,
            aws_access_key_id=settings.S3_ACCESS_KEY_ID,
            aws_secret_access_key=settings.S3_SECRET_ACCESS_KEY,
            region_name=settings.S3_REGION,
            config=Config(signature_version="s3v4", connect_timeout=3, read_timeout=10, retries={"max_attempts": 2}),
        )
    return s3


def _unavailable(exc: Exception, operation: str) -> ServiceUnavailable:
    log.error("commerce.storage_failed", operation=operation, error=type(exc).__name__)
    return ServiceUnavailable("Object storage is unavailable; try again later.", code="STORAGE_UNAVAILABLE")


def _ensure_bucket(bucket: str) -> None:
    if bucket in _bucket_ready:
        return
    s3 = client()
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError:
        s3.create_bucket(Bucket=bucket)
    _bucket_ready.add(bucket)


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
