"""Product media through HTTP against the real object storage (SeaweedFS): the type sniffed from the
bytes, the size bound, presigned and streamed downloads from a private bucket, tenant isolation, and
deleted media's objects removed by the sweep task."""

from __future__ import annotations

import struct
import zlib

import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.commerce import storage, tasks
from apps.commerce.models import ProductMedia
from tests.commerce.conftest import new_merchant, new_product
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
MEDIA, PRODUCTS = "/v1/api/commerce/media", "/v1/api/commerce/products"


def png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")


@pytest.fixture
def shop(seeded, settings):
    settings.COMMERCE_MEDIA_BUCKET = "commerce-media-test"
    merchant = new_merchant()
    return merchant, new_product(merchant.id), make_caller(roles=[("ADMIN", merchant.id)]).client()


def upload(client, product_id, data: bytes, name="photo.txt", content_type="text/plain"):
    return client.post(
        MEDIA, {"productId": str(product_id), "file": SimpleUploadedFile(name, data, content_type=content_type)}, format="multipart"
    )


def test_an_image_is_stored_privately_and_read_back(shop):
    _, product, client = shop
    image = png()
    response = upload(client, product.id, image)  # declared text/plain: the bytes decide
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["contentType"], body["sizeBytes"], body["productId"]) == ("image/png", len(image), str(product.id))
    presigned = requests.get(body["url"], timeout=5)
    assert presigned.status_code == 200 and presigned.content == image
    # The bucket is created without any public ACL or policy (this SeaweedFS runs without S3
    # identities, so it answers anonymous reads anyway: docs/services/commerce.md).
    acl = storage.client().get_bucket_acl(Bucket="commerce-media-test")
    assert not [g for g in acl.get("Grants", []) if "AllUsers" in str(g.get("Grantee", {}).get("URI", ""))]
    streamed = client.get(f"{MEDIA}/{body['id']}/download")
    assert streamed.status_code == 200 and b"".join(streamed.streaming_content) == image
    assert streamed["Content-Type"] == "image/png" and streamed["X-Content-Type-Options"] == "nosniff"
    assert [row["id"] for row in client.get(MEDIA, {"productId": str(product.id)}).json()["results"]] == [body["id"]]


def test_only_images_within_the_size_limit_are_accepted(shop, settings):
    _, product, client = shop
    refused = upload(client, product.id, b"<svg xmlns='http://www.w3.org/2000/svg'/>", name="x.png", content_type="image/png")
    assert refused.status_code == 415 and refused.json()["code"] == "MEDIA_TYPE_NOT_ALLOWED"
    settings.COMMERCE_MEDIA_MAX_BYTES = 40
    too_big = upload(client, product.id, png() + b"\x00" * 64)
    assert too_big.status_code == 413 and too_big.json()["code"] == "MEDIA_TOO_LARGE"
    assert upload(client, product.id, b"").status_code == 400
    missing = client.post(MEDIA, {"productId": str(product.id)}, format="multipart")
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "file"
    assert client.post(MEDIA, {"productId": "1"}, format="json").status_code == 415  # multipart only
    assert not ProductMedia.objects.exists()


def test_another_merchants_media_is_not_found(shop):
    _, product, client = shop
    media_id = upload(client, product.id, png()).json()["id"]
    stranger = make_caller(roles=[("ADMIN", new_merchant().id)]).client()
    assert stranger.get(f"{MEDIA}/{media_id}").status_code == 404
    assert stranger.get(f"{MEDIA}/{media_id}/download").status_code == 404
    assert upload(stranger, product.id, png()).status_code == 404


def test_deleting_the_product_deletes_its_media_and_the_sweep_removes_the_object(shop, settings):
    _, product, client = shop
    body = upload(client, product.id, png()).json()
    assert client.delete(f"{PRODUCTS}/{product.id}").status_code == 204
    assert client.get(f"{MEDIA}/{body['id']}").status_code == 404
    settings.COMMERCE_MEDIA_SWEEP_GRACE_SECONDS = 0
    assert tasks.sweep_deleted_media() == 1
    assert tasks.sweep_deleted_media() == 0  # idempotent
    assert ProductMedia.all_objects.get(pk=body["id"]).object_removed_at is not None
    assert requests.get(body["url"], timeout=5).status_code == 404
