"""The S3 client every service that keeps objects uses (commerce's media, ledger's documents):
one client per thread and endpoint, and buckets created on first use."""

from __future__ import annotations

import threading

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from django.conf import settings

_local = threading.local()
_ready_buckets: set[tuple[str, str]] = set()


def s3_client(*, read_timeout: float = 10):
    """A client of `S3_ENDPOINT_URL` for this thread (boto3 clients are thread-safe, sessions are
    not). Keyed by the endpoint too, so a changed setting never reuses a client of the old one."""
    clients = _local.__dict__.setdefault("clients", {})
    key = (settings.S3_ENDPOINT_URL, read_timeout)
    if key not in clients:
        clients[key] = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.S3_ENDPOINT_URL,
            aws_access_key_id=settings.S3_ACCESS_KEY_ID,
            aws_secret_access_key=settings.S3_SECRET_ACCESS_KEY,
            region_name=settings.S3_REGION,
            config=Config(signature_version="s3v4", connect_timeout=3, read_timeout=read_timeout, retries={"max_attempts": 2}),
        )
    return clients[key]


def ensure_bucket(bucket: str, *, read_timeout: float = 10) -> None:
    """Create the (private) bucket unless this process has seen it on this endpoint."""
    if (settings.S3_ENDPOINT_URL, bucket) in _ready_buckets:
        return
    s3 = s3_client(read_timeout=read_timeout)
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError:
        s3.create_bucket(Bucket=bucket)
    _ready_buckets.add((settings.S3_ENDPOINT_URL, bucket))
