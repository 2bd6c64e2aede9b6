"""The generation pipeline's parts, free of the database: the finance export read page by page and
validated against its contract, the three renderers (CSV, XLSX, PDF) writing to a file as rows
arrive, and the per-document envelope encryption (docs/services/ledger.md).

Nothing here holds a period in memory: entries flow from one export page (at most
LEDGER_FETCH_PAGE_SIZE) through the renderer into a temporary file, which is then encrypted in
chunks into another temporary file. The trial balance keeps one total per account and currency."""

from __future__ import annotations

import csv
import datetime
import io
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import jsonschema_rs
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from requests import RequestException

from merchant_platform.http import session
from merchant_platform.verification.service_accounts import basic_auth_header

EXPORT_PATH = "/internal/general-ledger"
DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
ID = {"type": "string", "pattern": r"^[0-9]{1,19}$"}
TEXT = {"type": "string", "maxLength": 2000}
AMOUNT = {"type": "integer", "minimum": 0}
# The contract of finance's general-ledger export (finance's GeneralLedgerPageSerializer): what this
# service relies on. Anything else in a page is a FETCH_DATA_ERROR, never a half-right document.
ENTRY_SCHEMA = {
    "type": "object",
    "required": [
        "lineId",
        "date",
        "voucherId",
        "voucherNumber",
        "kind",
        "voucherStatus",
        "lineNumber",
        "accountId",
        "accountCode",
        "accountName",
        "accountType",
        "currency",
        "debit",
        "credit",
    ],
    "properties": {
        "lineId": ID,
        "date": DATE,
        "voucherId": ID,
        "voucherNumber": TEXT,
        "kind": TEXT,
        "reason": TEXT,
        "voucherStatus": TEXT,
        "memo": TEXT,
        "reversesId": {"anyOf": [ID, {"type": "null"}]},
        "lineNumber": {"type": "integer", "minimum": 0},
        "accountId": ID,
        "accountCode": TEXT,
        "accountName": TEXT,
        "accountType": TEXT,
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "debit": AMOUNT,
        "credit": AMOUNT,
    },
}
PAGE_SCHEMA = {
    "type": "object",
    "required": ["merchantId", "dateFrom", "dateTo", "entries", "nextCursor"],
    "properties": {
        "merchantId": ID,
        "dateFrom": DATE,
        "dateTo": DATE,
        "entries": {"type": "array", "items": ENTRY_SCHEMA},
        "nextCursor": {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 64}, {"type": "null"}]},
    },
}
# Compiled (jsonschema-rs): pure-Python validation of every page was most of a run's time
# (docs/performance.md, "ledger").
_page_validator = jsonschema_rs.Draft202012Validator(PAGE_SCHEMA)


class FetchFailed(Exception):
    """The export could not be read or broke its contract (FETCH_DATA_ERROR)."""


@dataclass
class FetchStats:
    pages: int = 0
    entries: int = 0


def fetch_entries(*, merchant_id: int, date_from: datetime.date, date_to: datetime.date, stats: FetchStats) -> Iterator[dict]:
    """Every posted line of the merchant in the period, in (date, line) order, page by page."""
    url = settings.LEDGER_FINANCE_URL.rstrip("/") + EXPORT_PATH
    params = {"merchantId": str(merchant_id), "dateFrom": date_from.isoformat(), "dateTo": date_to.isoformat()}
    params["limit"] = str(settings.LEDGER_FETCH_PAGE_SIZE)
    first, last = date_from.isoformat(), date_to.isoformat()
    cursor = None
    with session() as http:
        while True:
            page = _page(http, url, {**params, **({"cursor": cursor} if cursor else {})})
            if page["merchantId"] != str(merchant_id):
                raise FetchFailed("finance's export answered for another merchant")
            stats.pages += 1
            for entry in page["entries"]:
                if not first <= entry["date"] <= last:
                    raise FetchFailed("finance's export returned a line outside the period")
                stats.entries += 1
                yield entry
            cursor = page["nextCursor"]
            if cursor is None:
                return


def _page(http, url: str, params: dict) -> dict:
    """One export page, checked against PAGE_SCHEMA."""
    try:
        response = http.get(url, params=params, headers={"Authorization": basic_auth_header()})
    except RequestException as exc:
        raise FetchFailed(f"finance's export did not answer ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise FetchFailed(f"finance's export answered HTTP {response.status_code}")
    try:
        page = response.json()
    except ValueError:
        raise FetchFailed("finance's export answered something that is not JSON") from None
    error = next(iter(_page_validator.iter_errors(page)), None)
    if error is not None:
        where = "/".join(str(part) for part in error.instance_path) or "page"
        raise FetchFailed(f"finance's export broke its schema at {where}: {type(error.kind).__name__}")
    return page


# --- What each document type shows ------------------------------------------------------------

TITLES = {"GENERAL_LEDGER": "General ledger", "TRIAL_BALANCE": "Trial balance", "ACCOUNT_STATEMENT": "Account statement"}
GL_COLUMNS = ("Date", "Voucher", "Kind", "Voucher status", "Line", "Account code", "Account name", "Currency", "Debit", "Credit", "Memo")
TB_COLUMNS = ("Account code", "Account name", "Account type", "Currency", "Debit", "Credit", "Net (debit - credit)")
ST_COLUMNS = ("Date", "Voucher", "Kind", "Line", "Memo", "Currency", "Debit", "Credit", "Running net")


def _gl_row(entry: dict) -> tuple:
    return (
        entry["date"],
        entry["voucherNumber"],
        entry["kind"],
        entry["voucherStatus"],
        entry["lineNumber"],
        entry["accountCode"],
        entry["accountName"],
        entry["currency"],
        entry["debit"],
        entry["credit"],
        entry.get("memo") or "",
    )


def rows_for(kind: str, entries: Iterable[dict], *, account_id: int | None) -> tuple[tuple, Iterator[tuple]]:
    """The column names and the rows of a document of `kind` over `entries` (a stream)."""
    if kind == "GENERAL_LEDGER":
        return GL_COLUMNS, (_gl_row(entry) for entry in entries)
    if kind == "ACCOUNT_STATEMENT":

        def statement() -> Iterator[tuple]:
            running: dict[str, int] = {}
            for entry in entries:
                if entry["accountId"] != str(account_id):
                    continue
                currency = entry["currency"]
                running[currency] = running.get(currency, 0) + entry["debit"] - entry["credit"]
                yield (
                    entry["date"],
                    entry["voucherNumber"],
                    entry["kind"],
                    entry["lineNumber"],
                    entry.get("memo") or "",
                    currency,
                    entry["debit"],
                    entry["credit"],
                    running[currency],
                )

        return ST_COLUMNS, statement()

    def trial_balance() -> Iterator[tuple]:
        totals: dict[tuple[str, str], list] = {}
        for entry in entries:
            total = totals.setdefault((entry["accountCode"], entry["currency"]), [entry["accountName"], entry["accountType"], 0, 0])
            total[2] += entry["debit"]
            total[3] += entry["credit"]
        sums: dict[str, list[int]] = {}
        for (code, currency), (name, type_, debit, credit) in sorted(totals.items()):
            yield (code, name, type_, currency, debit, credit, debit - credit)
            currency_sum = sums.setdefault(currency, [0, 0])
            currency_sum[0] += debit
            currency_sum[1] += credit
        for currency, (debit, credit) in sorted(sums.items()):
            yield ("TOTAL", "", "", currency, debit, credit, debit - credit)

    return TB_COLUMNS, trial_balance()


@dataclass(frozen=True)
class Heading:
    title: str
    merchant_id: int
    period: str
    date_from: datetime.date
    date_to: datetime.date
    draft: bool
    generated_at: datetime.datetime
    account_id: int | None = None

    @property
    def status_line(self) -> str:
        return "DRAFT - the period is still open; figures may change" if self.draft else "FINAL - the period is closed"

    def lines(self) -> list[tuple[str, str]]:
        lines = [
            ("Document", self.title),
            ("Merchant", str(self.merchant_id)),
            ("Period", f"{self.period} ({self.date_from.isoformat()} to {self.date_to.isoformat()})"),
        ]
        if self.account_id is not None:
            lines.append(("Account", str(self.account_id)))
        lines += [
            ("Status", self.status_line),
            ("Generated", self.generated_at.strftime("%Y-%m-%d %H:%M:%S UTC")),
            ("Amounts", "integer minor units of the line's currency"),
        ]
        return lines


# --- Renderers: write the heading, the columns and the rows into `out` (a binary file) -----------


def render_csv(heading: Heading, columns: tuple, rows: Iterable[tuple], out) -> None:
    text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=False)
    writer = csv.writer(text)
    for name, value in heading.lines():
        writer.writerow((name, value))
    writer.writerow(())
    writer.writerow(columns)
    writer.writerows(rows)
    text.flush()
    text.detach()


def render_xlsx(heading: Heading, columns: tuple, rows: Iterable[tuple], out) -> None:
    from openpyxl import Workbook  # imported by the worker only when it renders a workbook

    workbook = Workbook(write_only=True)  # rows go to a temporary file as they are appended
    sheet = workbook.create_sheet(heading.title[:31])
    for name, value in heading.lines():
        sheet.append((name, value))
    sheet.append(())
    sheet.append(columns)
    for row in rows:
        sheet.append(row)
    workbook.save(out)


PDF_WIDTHS = {
    GL_COLUMNS: (62, 70, 70, 52, 26, 56, 110, 42, 66, 66, 150),
    TB_COLUMNS: (80, 170, 80, 50, 100, 100, 120),
    ST_COLUMNS: (62, 80, 80, 30, 190, 44, 80, 80, 80),
}


def render_pdf(heading: Heading, columns: tuple, rows: Iterable[tuple], out) -> None:
    from reportlab.lib.pagesizes import A4, landscape
    from reportlab.pdfgen.canvas import Canvas

    width, height = landscape(A4)
    canvas = Canvas(out, pagesize=(width, height), pageCompression=1)
    canvas.setTitle(f"{heading.title} {heading.period}{' (DRAFT)' if heading.draft else ''}")
    widths = PDF_WIDTHS[columns]
    margin, line_height = 30, 11
    state = {"page": 0, "y": 0.0}

    def cells(values, font: str) -> None:
        canvas.setFont(font, 7)
        x = margin
        for value, column_width in zip(values, widths, strict=False):
            text = str(value)
            numeric = isinstance(value, int)
            while text and canvas.stringWidth(text, font, 7) > column_width - 4:
                text = text[:-1]
            if numeric:
                canvas.drawRightString(x + column_width - 4, state["y"], text)
            else:
                canvas.drawString(x, state["y"], text)
            x += column_width
        state["y"] -= line_height

    def new_page() -> None:
        if state["page"]:
            canvas.showPage()
        state["page"] += 1
        state["y"] = height - margin
        canvas.setFont("Helvetica-Bold", 11)
        canvas.drawString(margin, state["y"], f"{heading.title} - merchant {heading.merchant_id} - {heading.period}")
        canvas.drawRightString(width - margin, state["y"], f"page {state['page']}")
        state["y"] -= 14
        canvas.setFont("Helvetica-Bold" if heading.draft else "Helvetica", 9)
        canvas.drawString(margin, state["y"], heading.status_line)
        state["y"] -= 12
        if state["page"] == 1:
            canvas.setFont("Helvetica", 8)
            for name, value in heading.lines():
                canvas.drawString(margin, state["y"], f"{name}: {value}")
                state["y"] -= 10
        if heading.draft:
            canvas.saveState()
            canvas.setFont("Helvetica-Bold", 90)
            canvas.setFillGray(0.9)
            canvas.translate(width / 2, height / 2)
            canvas.rotate(30)
            canvas.drawCentredString(0, 0, "DRAFT")
            canvas.restoreState()
        state["y"] -= 4
        cells(columns, "Helvetica-Bold")

    new_page()
    for row in rows:
        if state["y"] < margin:
            new_page()
        cells(row, "Helvetica")
    canvas.save()


RENDERERS: dict[str, tuple[Callable, str, str]] = {
    "CSV": (render_csv, "text/csv; charset=utf-8", "csv"),
    "XLSX": (render_xlsx, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
    "PDF": (render_pdf, "application/pdf", "pdf"),
}


# --- Envelope encryption: one random AES-256 data key per document, sealed in chunks ------------
#
# MPLEDGER2, online authenticated encryption (the STREAM construction, as Tink's streaming AEAD and
# age use it), so a download decrypts as it reads and never releases a byte that did not
# authenticate:
#   header = MAGIC | chunk size (4 bytes, big-endian) | nonce prefix (8 random bytes)
#   then one record per chunk of the plaintext (the last one shorter, or empty for an empty file):
#   AES-256-GCM(data key, nonce = prefix | chunk counter (4 bytes, big-endian),
#               associated data = header | final flag (0x01 on the last chunk, else 0x00) | the
#               document's associated data) = ciphertext | 16-byte tag.
# The counter in the nonce refuses reordered, dropped or repeated chunks; the final flag refuses a
# document cut at a chunk boundary or with anything appended; the header (in every chunk's
# associated data) refuses a changed chunk size or prefix.
# MPLEDGER1 (MAGIC | nonce | ciphertext | tag: one AES-256-GCM message over the whole document) was
# written before MPLEDGER2; such documents still open, authenticated whole in memory.

MAGIC, LEGACY_MAGIC = b"MPLEDGER2", b"MPLEDGER1"
NONCE_BYTES, TAG_BYTES, PREFIX_BYTES = 12, 16, 8
CHUNK = 64 * 1024
MAX_CHUNK = 4 * 1024 * 1024  # a header naming more is refused: a reader never buffers more per chunk
HEADER_BYTES = len(MAGIC) + 4 + PREFIX_BYTES


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def _read_exact(read: Callable[..., bytes], size: int) -> bytes:
    """`size` bytes from `read`, fewer only at the end of the stream."""
    data = read(size)
    if len(data) in (0, size):
        return data
    parts, got = [data], len(data)
    while got < size and (more := read(size - got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _chunk_nonce(prefix: bytes, counter: int) -> bytes:
    return prefix + counter.to_bytes(4, "big")


def _chunk_data(header: bytes, final: bool, associated_data: bytes) -> bytes:
    return header + (b"\x01" if final else b"\x00") + associated_data


def encrypt_file(source, target, *, key: bytes, associated_data: bytes, chunk_size: int = CHUNK) -> int:
    """Seal `source` (read from its start) into `target` as MPLEDGER2; returns the bytes written."""
    prefix = os.urandom(PREFIX_BYTES)
    header = MAGIC + chunk_size.to_bytes(4, "big") + prefix
    aead = AESGCM(key)
    source.seek(0)
    target.write(header)
    written, counter = len(header), 0
    current = _read_exact(source.read, chunk_size)
    while True:
        following = _read_exact(source.read, chunk_size)  # read ahead: none means `current` is the last
        final = not following
        record = aead.encrypt(_chunk_nonce(prefix, counter), current, _chunk_data(header, final, associated_data))
        target.write(record)
        written += len(record)
        if final:
            break
        current, counter = following, counter + 1
    target.flush()
    target.seek(0)
    return written


def decrypt_chunks(read: Callable[..., bytes], *, key: bytes, associated_data: bytes) -> Iterator[bytes]:
    """The plaintext of a sealed document read through `read(size)`, chunk by chunk: each chunk is
    authenticated before it is yielded. Raises InvalidTag (tampered, truncated, extended, another
    key) or ValueError (not a ledger document) where the damage is found; what was yielded before
    is authentic. Holds two records of the stream at a time (a legacy MPLEDGER1 document whole)."""
    magic = _read_exact(read, len(MAGIC))
    if magic == LEGACY_MAGIC:
        yield decrypt_legacy(magic + read(), key=key, associated_data=associated_data)
        return
    if magic != MAGIC:
        raise ValueError("not a ledger document")
    header = magic + _read_exact(read, HEADER_BYTES - len(MAGIC))
    chunk_size, prefix = int.from_bytes(header[len(MAGIC) : len(MAGIC) + 4], "big"), header[len(MAGIC) + 4 :]
    if len(header) != HEADER_BYTES or not 0 < chunk_size <= MAX_CHUNK:
        raise ValueError("not a ledger document")
    aead, record_size, counter = AESGCM(key), chunk_size + TAG_BYTES, 0
    current = _read_exact(read, record_size)
    while True:
        following = _read_exact(read, record_size)
        final = not following
        yield aead.decrypt(_chunk_nonce(prefix, counter), current, _chunk_data(header, final, associated_data))
        if final:
            return
        current, counter = following, counter + 1


def decrypt_legacy(sealed: bytes, *, key: bytes, associated_data: bytes) -> bytes:
    """An MPLEDGER1 document's plaintext, authenticated whole before it is returned."""
    body = memoryview(sealed)[len(LEGACY_MAGIC) :]
    return AESGCM(key).decrypt(bytes(body[:NONCE_BYTES]), bytes(body[NONCE_BYTES:]), associated_data)
