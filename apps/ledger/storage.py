"""Encrypted ledger documents in object storage (S3 API; SeaweedFS here): a private bucket written
and read only by ledger. Objects are ciphertext (docs/services/ledger.md, "Encryption at rest");
no URL of this storage ever leaves the service, in a response or a log line."""

from __future__ import annotations

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings

from merchant_platform.errors import ServiceUnavailable
from merchant_platform.logging import get_logger
from merchant_platform.storage import ensure_bucket, s3_client

log = get_logger(__name__)
TRANSFER = TransferConfig(multipart_threshold=16 * 1024 * 1024, multipart_chunksize=16 * 1024 * 1024, max_concurrency=2)


class StorageFailed(ServiceUnavailable):
    def __init__(self, operation: str, exc: Exception):
        # The error's class name only: botocore messages may carry the endpoint.
        log.error("ledger.storage_failed", operation=operation, error=type(exc).__name__)
        super().__init__("Object storage is unavailable; try again later.", code="STORAGE_UNAVAILABLE")


def client():
    return s3_client(read_timeout=30)


def _ensure_bucket(bucket: str) -> None:
    ensure_bucket(bucket, read_timeout=30)


def upload(key: str, fileobj) -> None:
    """Store the file under `key` (multipart above 16 MiB: an object appears whole or not at all)."""
    bucket = settings.LEDGER_BUCKET
    try:
        _ensure_bucket(bucket)
        client().upload_fileobj(fileobj, bucket, key, Config=TRANSFER, ExtraArgs={"ContentType": "application/octet-stream"})
    except (BotoCoreError, ClientError) as exc:
        raise StorageFailed("put", exc) from None


def read(key: str) -> bytes:
    try:
        return client().get_object(Bucket=settings.LEDGER_BUCKET, Key=key)["Body"].read()
    except (BotoCoreError, ClientError) as exc:
        raise StorageFailed("get", exc) from None


class ObjectStream:
    """An object's body as it arrives: `read(size)` (storage failures mid-way raise StorageFailed)
    and `close()`, which releases the connection."""

    def __init__(self, body):
        self._body = body

    def read(self, size: int | None = None) -> bytes:
        try:
            return self._body.read(size)
        except BotoCoreError as exc:
            raise StorageFailed("get", exc) from None

    def close(self) -> None:
        self._body.close()


def open_stream(key: str) -> ObjectStream:
    try:
        return ObjectStream(client().get_object(Bucket=settings.LEDGER_BUCKET, Key=key)["Body"])
    except (BotoCoreError, ClientError) as exc:
        raise StorageFailed("get", exc) from None


def delete(key: str) -> None:
    try:
        client().delete_object(Bucket=settings.LEDGER_BUCKET, Key=key)
    except (BotoCoreError, ClientError) as exc:
        raise StorageFailed("delete", exc) from None
