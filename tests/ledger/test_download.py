"""Downloads stream: the document is read from S3 and decrypted chunk by chunk (MPLEDGER2,
docs/services/ledger.md "Encryption at rest"), and no chunk leaves before it authenticated. The
format alone (every flipped byte, every truncation, reordered, dropped and repeated chunks, bytes
appended, another document's associated data), then through the pipeline, SeaweedFS and the API: a
large document arrives byte for byte with the process's traced memory bounded by a few chunks, a
tampered or truncated object ends the download after the authentic chunks before the damage (short
of its Content-Length, so a client over HTTP sees an incomplete body), and a document of the
earlier single-message format (MPLEDGER1) still opens."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tracemalloc

import pytest
import requests
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from apps.ledger import documents, services, storage
from apps.ledger.models import LedgerJob
from merchant_platform import crypto
from merchant_platform.errors import ApiError
from tests.ledger.conftest import downloaded
from tests.signal.conftest import PORTS
from tests.support.ports import answers, free_port
from tests.support.processes import Process
from tests.support.waiting import wait_for

BASE = "/v1/api/ledger/ledgers"
MERCHANT = 64_001
SMALL = 64  # the format tests' chunk size
AD = b"ledger-document:1:key"


def seal(plain: bytes, *, chunk_size: int = SMALL, associated_data: bytes = AD, key: bytes = b"k" * 32) -> bytes:
    sealed = io.BytesIO()
    documents.encrypt_file(io.BytesIO(plain), sealed, key=key, associated_data=associated_data, chunk_size=chunk_size)
    return sealed.getvalue()


def opened(sealed: bytes, *, associated_data: bytes = AD, key: bytes = b"k" * 32) -> tuple[bytes, Exception | None]:
    """What a reader released before it stopped, and why it stopped (None: the whole document)."""
    released = []
    try:
        for chunk in documents.decrypt_chunks(io.BytesIO(sealed).read, key=key, associated_data=associated_data):
            released.append(chunk)
    except (InvalidTag, ValueError) as exc:
        return b"".join(released), exc
    return b"".join(released), None


def records(sealed: bytes, chunk_size: int = SMALL) -> tuple[bytes, list[bytes]]:
    size = chunk_size + documents.TAG_BYTES
    body = sealed[documents.HEADER_BYTES :]
    return sealed[: documents.HEADER_BYTES], [body[i : i + size] for i in range(0, len(body), size)]


@pytest.mark.parametrize("length", [0, 1, SMALL - 1, SMALL, SMALL + 1, 3 * SMALL, 3 * SMALL + 5])
def test_every_length_opens_to_itself(length):
    plain = os.urandom(length)
    sealed = seal(plain)
    assert sealed.startswith(b"MPLEDGER2")
    assert len(sealed) == documents.HEADER_BYTES + max(1, -(-length // SMALL)) * documents.TAG_BYTES + length
    assert opened(sealed) == (plain, None)


def test_no_damage_releases_a_damaged_chunk():
    plain = os.urandom(3 * SMALL + 10)
    sealed = seal(plain)
    for position in range(len(sealed)):  # every byte flipped: the header, each nonce-bound record, each tag
        damaged = bytearray(sealed)
        damaged[position] ^= 0x01
        released, error = opened(bytes(damaged))
        assert error is not None, position
        chunk = max(0, position - documents.HEADER_BYTES) // (SMALL + documents.TAG_BYTES)
        assert released == plain[: chunk * SMALL], position
    for length in range(len(sealed)):  # every truncation, at chunk boundaries and inside records
        released, error = opened(sealed[:length])
        assert error is not None and plain.startswith(released) and len(released) < len(plain), length


def test_reordered_dropped_repeated_or_extended_chunks_do_not_open():
    plain = os.urandom(4 * SMALL)
    header, chunks = records(seal(plain))
    assert len(chunks) == 4
    for changed in (
        [chunks[1], chunks[0], *chunks[2:]],  # reordered
        [chunks[0], *chunks[2:]],  # one dropped from the middle
        chunks[:3],  # the last dropped: cut at a chunk boundary
        [chunks[0], chunks[0], *chunks[1:]],  # repeated
        [*chunks, chunks[3]],  # the final chunk repeated after itself
    ):
        released, error = opened(header + b"".join(changed))
        assert isinstance(error, InvalidTag) and plain.startswith(released) and len(released) < len(plain)
    assert opened(seal(plain) + b"\x00")[1] is not None  # anything appended
    other_header, _ = records(seal(plain))  # another document's header (its nonce prefix) over these records
    released, error = opened(other_header + b"".join(chunks))
    assert released == b"" and isinstance(error, InvalidTag)


def test_another_documents_associated_data_or_key_does_not_open():
    sealed = seal(b"x" * 200)
    assert isinstance(opened(sealed, associated_data=b"ledger-document:2:key")[1], InvalidTag)
    assert isinstance(opened(sealed, key=b"j" * 32)[1], InvalidTag)
    assert isinstance(opened(b"%PDF-1.4 not sealed")[1], ValueError)
    huge = bytearray(sealed)
    huge[9:13] = (documents.MAX_CHUNK + 1).to_bytes(4, "big")  # a header asking the reader to buffer more
    released, error = opened(bytes(huge))
    assert released == b"" and isinstance(error, ValueError)


def test_a_single_message_document_of_the_earlier_format_still_opens():
    key, nonce, plain = b"k" * 32, os.urandom(12), os.urandom(1000)
    legacy = b"MPLEDGER1" + nonce + AESGCM(key).encrypt(nonce, plain, AD)
    assert opened(legacy) == (plain, None)
    tampered = bytearray(legacy)
    tampered[30] ^= 1
    released, error = opened(bytes(tampered))
    assert released == b"" and isinstance(error, InvalidTag)


# --- Through the pipeline, SeaweedFS and the API -------------------------------------------------------


@pytest.fixture
def owner(make_caller, seeded):
    return make_caller(roles=[("OWNER", MERCHANT)], merchants=[MERCHANT])


@pytest.fixture
def stored(finance, monkeypatch):
    """`stored(payload)`: a COMPLETED job whose document is `payload`, through the real run (its CSV
    renderer replaced by one writing the payload), encryption and upload."""

    def store(payload: bytes) -> LedgerJob:
        def render(heading, columns, rows, out):
            out.write(payload)

        monkeypatch.setitem(documents.RENDERERS, "CSV", (render, "text/csv; charset=utf-8", "csv"))
        job = services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period="2025-10")
        services.job_run(ledger_id=job.id, run_id=str(services.job_start(ledger_id=job.id)))
        job.refresh_from_db()
        assert job.status == "COMPLETED" and job.content_length == len(payload)
        return job

    return store


def read_until_it_fails(response) -> tuple[bytes, ApiError | None]:
    released = []
    try:
        for chunk in response.streaming_content:
            released.append(chunk)
    except ApiError as exc:
        return b"".join(released), exc
    return b"".join(released), None


def rewrite(job: LedgerJob, change) -> None:
    storage.upload(job.object_key, io.BytesIO(change(storage.read(job.object_key))))


@pytest.mark.django_db(databases="__all__")
def test_a_large_document_streams_byte_for_byte_in_bounded_memory(stored, owner):
    payload = os.urandom(24 * 1024 * 1024 + 12_345)  # 385 chunks, over S3's multipart threshold
    job = stored(payload)

    response = owner.client().get(f"{BASE}/{job.id}/download")

    assert response.streaming and response["Content-Length"] == str(len(payload))
    assert hashlib.sha256(downloaded(response)).digest() == hashlib.sha256(payload).digest()
    tracemalloc.start()
    try:
        digest = hashlib.sha256()
        for chunk in services.job_download(ledger_id=job.id).chunks:
            digest.update(chunk)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest.digest() == hashlib.sha256(payload).digest()
    assert peak < 1024 * 1024, f"peak {peak} bytes while streaming a {len(payload)}-byte document"


@pytest.mark.django_db(databases="__all__")
def test_a_tampered_chunk_ends_the_download_after_the_authentic_chunks_before_it(stored, owner, caplog):
    chunk = documents.CHUNK
    payload = os.urandom(10 * chunk + 777)
    job = stored(payload)
    record = chunk + documents.TAG_BYTES

    def flip_in_chunk_six(sealed: bytes) -> bytes:
        damaged = bytearray(sealed)
        damaged[documents.HEADER_BYTES + 6 * record + 100] ^= 0x40
        return bytes(damaged)

    rewrite(job, flip_in_chunk_six)
    response = owner.client().get(f"{BASE}/{job.id}/download")

    assert response.status_code == 200 and response["Content-Length"] == str(len(payload))
    released, error = read_until_it_fails(response)
    assert error is not None and error.code == "DECRYPT_FAILED"
    assert released == payload[: 6 * chunk]  # chunks 0-5, and nothing of chunk 6
    assert any(r.msg.get("event") == "decrypt failed" for r in caplog.records if isinstance(r.msg, dict))


@pytest.mark.django_db(databases="__all__")
def test_a_truncated_object_ends_the_download_short_or_is_refused_before_any_byte(stored, owner):
    chunk, record = documents.CHUNK, documents.CHUNK + documents.TAG_BYTES
    payload = os.urandom(5 * chunk + 1)
    job = stored(payload)

    rewrite(job, lambda sealed: sealed[: documents.HEADER_BYTES + 5 * record])  # the last record gone
    released, error = read_until_it_fails(owner.client().get(f"{BASE}/{job.id}/download"))
    assert error is not None and error.code == "DECRYPT_FAILED"
    assert released == payload[: 4 * chunk]  # chunk 4 was the last one left, and it is not final

    rewrite(job, lambda sealed: sealed[: documents.HEADER_BYTES + 100])  # inside the first record
    refused = owner.client().get(f"{BASE}/{job.id}/download")
    assert refused.status_code == 500 and refused.json()["code"] == "DECRYPT_FAILED"


@pytest.fixture
def wsgi_url(subprocess_env, jwks_url, writable_bucket, tmp_path):
    """Ledger alone (APP_SERVICE=ledger) under granian, the REST server `manage.py serve` runs, on
    the test database and bucket, verifying the tests' tokens through `jwks_url`."""
    port = free_port(PORTS)
    command = [sys.executable, "-m", "granian", "--interface=wsgi", "--no-ws", "--host=127.0.0.1", f"--port={port}"]
    env = subprocess_env(APP_SERVICE="ledger", IDENTITY_JWKS_URL=jwks_url, LEDGER_BUCKET=writable_bucket)
    server = Process([*command, "--workers=1", "--log-level=warning", "merchant_platform.wsgi:application"], env, tmp_path / "granian.log")
    try:
        wait_for(lambda: answers(port) or server.popen.poll() is not None, timeout=60, message="granian")
        assert server.popen.poll() is None, server.output
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_over_http_a_damaged_document_is_an_incomplete_body(stored, owner, wsgi_url):
    payload = os.urandom(8 * documents.CHUNK)
    job = stored(payload)
    url, headers = f"{wsgi_url}{BASE}/{job.id}/download", {"Authorization": f"Bearer {owner.token}"}
    assert requests.get(url, headers=headers, timeout=30).content == payload

    rewrite(job, lambda sealed: sealed[:-1] + bytes([sealed[-1] ^ 1]))  # the final chunk's tag
    received = bytearray()
    with requests.get(url, headers=headers, stream=True, timeout=30) as response:
        assert response.status_code == 200 and response.headers["Content-Length"] == str(len(payload))
        with pytest.raises(requests.exceptions.ChunkedEncodingError, match="IncompleteRead"):
            for part in response.iter_content(64 * 1024):
                received += part
    assert payload.startswith(received) and len(received) <= 7 * documents.CHUNK  # nothing of the last chunk


@pytest.mark.django_db(databases="__all__")
def test_a_document_of_the_earlier_format_downloads(stored, owner):
    """A job completed before MPLEDGER2: its object is one AES-256-GCM message under the same data
    key and associated data; it opens whole in memory and downloads the same way."""
    payload = os.urandom(300_000)
    job = stored(payload)
    data_key = crypto.decrypt_bytes(job.wrapped_key, purpose=services.KEY_PURPOSE, associated_data=str(job.id).encode())
    nonce = os.urandom(12)
    associated_data = f"ledger-document:{job.id}:{job.object_key}".encode()
    rewrite(job, lambda _sealed: b"MPLEDGER1" + nonce + AESGCM(data_key).encrypt(nonce, payload, associated_data))

    assert downloaded(owner.client().get(f"{BASE}/{job.id}/download")) == payload
