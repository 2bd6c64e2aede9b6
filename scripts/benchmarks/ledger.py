"""Target `ledger`: generation time and peak memory of a ledger run, and download throughput.

(a) one GENERAL_LEDGER run (services.job_run: fetch from finance's export over HTTP, render, encrypt,
    upload to S3) for periods of 1,000, 10,000 and 100,000 postings in CSV, XLSX and PDF; each run in
    a fresh worker-like process, timed, with the growth of its peak memory (ru_maxrss) over the
    process as it was just before the run, and that peak; with --repeat N, N runs and the median;
(b) downloads (services.job_download: S3 read, data key unsealed, each chunk authenticated as it
    streams, consumed as a response would) of the 10,000- and 100,000-posting CSV, per second and
    MB/s, with the growth of the downloading process's peak memory, in a fresh process.
Every case also reports other_cpu_pct: the CPU the rest of the machine used meanwhile.
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

from benchmarks.framework import REPO_ROOT, BenchmarkError, Context, CpuMeter

SIZES = (1_000, 10_000, 100_000)
FORMATS = ("CSV", "XLSX", "PDF")
MERCHANT_BASE = 7_700_000_000  # merchant id = base + number of postings in the period
PERIOD, FIRST_DAY, DAYS = "2025-03", datetime.date(2025, 3, 1), 31
DOWNLOADS = {10_000: 50, 100_000: 10}  # the CSV documents downloaded, and how many times
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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    job = LedgerJob.objects.get(pk=job.id)
    return {
        "ledgerId": job.id,
        "status": job.status,
        "seconds": seconds,
        "growth_mib": (peak - before) / 1024,
        "peak_mib": peak / 1024,
        "bytes": job.content_length,
    }


def download_case(ledger_id: int, count: int) -> dict:
    """In a fresh process: download the document `count` times (S3 read, data key unsealed, chunks
    authenticated as they stream), consuming each chunk as a response would."""
    import resource

    from apps.ledger import services

    services.job_download(ledger_id=ledger_id).chunks.close()  # the S3 client and the job row, once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, received = time.perf_counter(), 0
    for _ in range(count):
        for chunk in services.job_download(ledger_id=ledger_id).chunks:
            received += len(chunk)
    seconds = time.perf_counter() - started
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return {"seconds": seconds, "bytes": received, "growth_mib": growth}


def in_process(ctx: Context, env: dict, *args: str) -> tuple[dict, dict]:
    """Run `python -m benchmarks.ledger <args>` in a process of its own; its JSON line and the CPU
    the rest of the machine used meanwhile (other_cpu_pct)."""
    meter = CpuMeter(set())
    command = [sys.executable, "-m", "benchmarks.ledger", *args]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=900)  # noqa: S603
    load = meter.stop(1)
    if done.returncode != 0:
        raise BenchmarkError(f"ledger {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), {"other_cpu_pct": load["other_cpu_pct"]}


def run(ctx: Context) -> list[dict]:
    ctx.django()
    server = make_server("127.0.0.1", 0, export_app, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    finance_url = f"http://127.0.0.1:{server.server_port}/v1/api/finance"
    env = ctx.server_env(LEDGER_FINANCE_URL=finance_url, APP_ENV_APPLICATION_ROLES="worker")
    results, csv_jobs = [], {}
    try:
        for size in SIZES:
            for document_format in FORMATS:
                runs = []
                for _ in range(ctx.repeat):
                    case, load = in_process(ctx, env, "run", str(size), document_format)
                    if case["status"] != "COMPLETED":
                        raise BenchmarkError(f"ledger run {size} {document_format} ended {case['status']}")
                    runs.append((case, load))
                runs.sort(key=lambda run: run[0]["seconds"])
                case, load = runs[len(runs) // 2]  # the median run
                results.append(
                    ctx.record(
                        f"(a) {size:,} postings, {document_format}",
                        seconds=round(case["seconds"], 2),
                        seconds_min=round(runs[0][0]["seconds"], 2),
                        seconds_max=round(runs[-1][0]["seconds"], 2),
                        postings_per_s=round(size / case["seconds"]),
                        peak_growth_mib=round(max(r["growth_mib"] for r, _ in runs), 1),
                        peak_rss_mib=round(max(r["peak_mib"] for r, _ in runs), 1),
                        document_bytes=case["bytes"],
                        **load,
                    )
                )
                if document_format == "CSV":
                    csv_jobs[size] = case["ledgerId"]
        for size, count in DOWNLOADS.items():
            for _ in range(ctx.repeat):
                case, load = in_process(ctx, env, "download", str(csv_jobs[size]), str(count))
                results.append(
                    ctx.record(
                        f"(b) download, {size:,}-posting CSV x {count}",
                        downloads_per_s=round(count / case["seconds"], 1),
                        mb_per_s=round(case["bytes"] / case["seconds"] / 1e6, 1),
                        peak_growth_mib=round(case["growth_mib"], 1),
                        document_bytes=case["bytes"] // count,
                        **load,
                    )
                )
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


if __name__ == "__main__":  # one measured case, in a process of its own (see in_process())
    import django

    django.setup()
    if sys.argv[1] == "run":
        print(json.dumps(run_case(int(sys.argv[2]), sys.argv[3])))
    else:
        print(json.dumps(download_case(int(sys.argv[2]), int(sys.argv[3]))))
