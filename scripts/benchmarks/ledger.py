"""Target `ledger`: generation time and peak memory of a ledger run, and download throughput.

(a) one GENERAL_LEDGER run (services.job_run: fetch from finance's export over HTTP, render, encrypt,
    upload to S3) for periods of 1,000, 10,000 and 100,000 postings in CSV, XLSX and PDF; each run in
    a fresh worker-like process, timed, with the growth of its peak memory (ru_maxrss) over the
    process as it was just before the run;
(b) downloads (services.job_download: S3 read, data key unsealed, AES-256-GCM opened in memory) of
    the 10,000-posting CSV, per second and MB/s, in this process.
Targets (issue 19): 100,000 postings as CSV in under 10 s with the worker's memory growing by less
than 100 MiB.

Finance's export is played by a WSGI server in this process that makes the postings on the fly
(finance's page shape and keyset cursor, docs/services/ledger.md), so the bench measures ledger,
not finance's database. Jobs are created in the bench database at each run.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import threading
import time
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

from benchmarks.framework import REPO_ROOT, BenchmarkError, Context

SIZES = (1_000, 10_000, 100_000)
FORMATS = ("CSV", "XLSX", "PDF")
MERCHANT_BASE = 7_700_000_000  # merchant id = base + number of postings in the period
PERIOD, FIRST_DAY, DAYS = "2025-03", datetime.date(2025, 3, 1), 31
DOWNLOADS = 50
MAX_CSV_SECONDS, MAX_GROWTH_MIB = 10.0, 100.0


def posting(index: int, total: int) -> dict:
    """Posting `index` (0-based) of a period of `total`: two-line vouchers, dates in order."""
    day = FIRST_DAY + datetime.timedelta(days=index * DAYS // total)
    voucher, line = divmod(index, 2)
    amount = 100 + (voucher * 37) % 9000
    code, name, kind = (("1000", "Cash", "ASSET"), ("4000", "Sales", "REVENUE"))[line]
    return {
        "lineId": str(index + 1),
        "date": day.isoformat(),
        "voucherId": str(1_000_000 + voucher),
        "voucherNumber": f"V-2025-{voucher + 1:06d}",
        "kind": "SALE",
        "reason": "",
        "voucherStatus": "issued",
        "memo": f"order {voucher}",
        "reversesId": None,
        "lineNumber": line + 1,
        "accountId": str(900_000 + int(code)),
        "accountCode": code,
        "accountName": name,
        "accountType": kind,
        "currency": "EUR",
        "debit": amount if line == 0 else 0,
        "credit": amount if line == 1 else 0,
    }


def export_app(environ, start_response):
    query = {key: values[0] for key, values in parse_qs(environ["QUERY_STRING"]).items()}
    merchant = int(query["merchantId"])
    total, limit = merchant - MERCHANT_BASE, int(query.get("limit", 500))
    start = int(query["cursor"].split("_")[1]) if "cursor" in query else 0
    end = min(start + limit, total)
    entries = [posting(index, total) for index in range(start, end)]
    body = {
        "merchantId": str(merchant),
        "dateFrom": query["dateFrom"],
        "dateTo": query["dateTo"],
        "entries": entries,
        "nextCursor": f"{entries[-1]['date']}_{entries[-1]['lineId']}" if end < total else None,
    }
    data = json.dumps(body).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        """No access log on stderr."""


def run_case(size: int, document_format: str) -> dict:
    """In a worker-like process (Django set up): create a job, start it, time its run."""
    import resource

    from apps.ledger import services
    from apps.ledger.models import LedgerJob

    job = services.job_create(merchant_id=MERCHANT_BASE + size, type="GENERAL_LEDGER", format=document_format, period=PERIOD)
    run_id = services.job_start(ledger_id=job.id)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    services.job_run(ledger_id=job.id, run_id=str(run_id))
    seconds = time.perf_counter() - started
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    job = LedgerJob.objects.get(pk=job.id)
    return {"ledgerId": job.id, "status": job.status, "seconds": seconds, "growth_mib": growth, "bytes": job.content_length}


def run(ctx: Context) -> list[dict]:
    ctx.django()
    from apps.ledger import services

    server = make_server("127.0.0.1", 0, export_app, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    finance_url = f"http://127.0.0.1:{server.server_port}/v1/api/finance"
    env = ctx.server_env(LEDGER_FINANCE_URL=finance_url, APP_ENV_APPLICATION_ROLES="worker")
    results, csv_10k = [], None
    try:
        for size in SIZES:
            for document_format in FORMATS:
                command = [sys.executable, "-m", "benchmarks.ledger", str(size), document_format]
                done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)  # noqa: S603
                if done.returncode != 0:
                    raise BenchmarkError(f"ledger run {size} {document_format} failed:\n{done.stderr[-2000:]}")
                case = json.loads(done.stdout.strip().splitlines()[-1])
                if case["status"] != "COMPLETED":
                    raise BenchmarkError(f"ledger run {size} {document_format} ended {case['status']}")
                results.append(
                    ctx.record(
                        f"(a) {size:,} postings, {document_format}",
                        seconds=round(case["seconds"], 2),
                        postings_per_s=round(size / case["seconds"]),
                        peak_growth_mib=round(case["growth_mib"], 1),
                        document_bytes=case["bytes"],
                    )
                )
                if size == 10_000 and document_format == "CSV":
                    csv_10k = case
        started = time.perf_counter()
        for _ in range(DOWNLOADS):
            document = services.job_download(ledger_id=csv_10k["ledgerId"])
        seconds = time.perf_counter() - started
        results.append(ctx.rate("(b) download, 10,000-posting CSV", DOWNLOADS, seconds, unit="downloads/s"))
        results.append(ctx.record("(b) download throughput", mb_per_s=round(DOWNLOADS * len(document.content) / seconds / 1e6, 1)))
    finally:
        server.shutdown()
    csv_100k = next(r for r in results if r["name"] == "(a) 100,000 postings, CSV")
    results.append(
        ctx.record(f"check: 100,000 CSV < {MAX_CSV_SECONDS} s", value=csv_100k["seconds"], passed=csv_100k["seconds"] < MAX_CSV_SECONDS)
    )
    results.append(
        ctx.record(
            f"check: 100,000 CSV memory growth < {MAX_GROWTH_MIB} MiB",
            value=csv_100k["peak_growth_mib"],
            passed=csv_100k["peak_growth_mib"] < MAX_GROWTH_MIB,
        )
    )
    return results


if __name__ == "__main__":  # one measured run, in a process of its own (see run())
    import django

    django.setup()
    print(json.dumps(run_case(int(sys.argv[1]), sys.argv[2])))
