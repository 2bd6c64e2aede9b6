"""Run benchmark targets and print their results: `scripts/bench [target...] [options]`.

Each target is a module of this package exposing `run(ctx) -> list[dict]`. Without a target, every
available one runs except `stack` and `servers` (analyses that take minutes).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS_DIR = HERE.parent
REPO_ROOT = SCRIPTS_DIR.parent
# Run as a script, this folder is sys.path[0]; take it off so `settings` means the product's package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
sys.path[:0] = [str(REPO_ROOT), str(SCRIPTS_DIR)]

from benchmarks.framework import DEFAULT_DATABASE_URL, BenchmarkError, Context, format_table, session_priority  # noqa: E402

TARGETS = (
    "base",
    "stack",
    "servers",
    "events",
    "identity",
    "outreach",
    "licensing",
    "taxation",
    "inventory",
    "commerce",
    "finance",
    "signal",
    "ledger",
    "payment",
    "checkout",
    "soak",
)
OPT_IN_TARGETS = ("stack", "servers")
# A target whose module cannot carry its name: `signal.py` here would shadow the standard library's
# `signal` wherever this folder is on sys.path.
TARGET_MODULES = {"signal": "signal_stream"}
SUMMARY_COLUMNS = [
    "name",
    "server",
    "rps",
    "rps_min",
    "rps_max",
    "rate",
    "unit",
    "p50_ms",
    "p99_ms",
    "wall_us_per_req",
    "errors",
    "error_pct",
    "non_2xx",
    "cpu_us_per_req",
    "other_cpu_pct",
    "rss_idle_mib",
    "rss_start_mib",
    "rss_end_mib",
    "growth_mib",
    "bound_mib",
    "value",
    "passed",
]
# Without --duration / --warmup a target runs 10 s after 2 s of warm-up, unless its module sets
# DEFAULT_DURATION / DEFAULT_WARMUP (a soak needs longer).
DURATION_SECONDS = 10.0
WARMUP_SECONDS = 2.0


def available_targets() -> list[str]:
    return [target for target in TARGETS if (HERE / f"{TARGET_MODULES.get(target, target)}.py").exists()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help=f"targets to run (available: {', '.join(available_targets())})")
    parser.add_argument("--duration", type=float, help="seconds per measurement (default 10; soak: 60)")
    parser.add_argument("--warmup", type=float, help="seconds of discarded load before each measurement (default 2; soak: 10)")
    parser.add_argument("--connections", type=int, default=64, help="concurrent connections of the load generator (default 64)")
    parser.add_argument("--wrk-threads", type=int, default=1, help="wrk threads (default 1: the load generator shares the 2 cores)")
    parser.add_argument("--repeat", type=int, default=1, help="measure each case this many times and report the median run (default 1)")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="on a shared machine, wait up to this many seconds for other load to drop before each measurement",
    )
    parser.add_argument(
        "--nice",
        type=int,
        help="run the bench (servers, gateway, load generator: all inherit it) at this scheduling priority, "
        "e.g. -10 on a shared machine so other jobs take only the CPU left over (negative values need root)",
    )
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    parser.add_argument("--quiet", action="store_true", help="print only the result tables")
    return parser.parse_args(argv)


def _stop_on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    available = available_targets()
    targets = args.targets or [target for target in available if target not in OPT_IN_TARGETS]
    unknown = [target for target in targets if target not in available]
    if unknown:
        print(f"unknown target(s): {', '.join(unknown)}; available: {', '.join(available)}", file=sys.stderr)
        return 2
    os.environ.setdefault("DATABASE_URL", DEFAULT_DATABASE_URL)
    if args.nice is not None and args.nice < 0 and os.geteuid() != 0:
        print(f"--nice {args.nice}: a negative priority needs root", file=sys.stderr)
        return 2
    with session_priority(args.nice):
        return run_targets(args, targets)


def run_targets(args: argparse.Namespace, targets: list[str]) -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)

    all_results: list[dict] = []
    database_ready = False
    for target in targets:
        module = importlib.import_module(f"benchmarks.{TARGET_MODULES.get(target, target)}")
        ctx = Context(
            target=target,
            duration=args.duration if args.duration is not None else getattr(module, "DEFAULT_DURATION", DURATION_SECONDS),
            warmup=args.warmup if args.warmup is not None else getattr(module, "DEFAULT_WARMUP", WARMUP_SECONDS),
            connections=args.connections,
            wrk_threads=args.wrk_threads,
            repeat=args.repeat,
            settle=args.settle,
            nice=args.nice,
            verbose=not args.quiet,
        )
        started = time.monotonic()
        try:
            if not database_ready:
                ctx.say(f"preparing database {ctx.database_url.rsplit('/', 1)[-1]} (manage.py migrate)")
                ctx.prepare_database()
                database_ready = True
            ctx.say(f"== {target}")
            results = module.run(ctx)
        except BenchmarkError as exc:
            if ctx.results:  # what was measured before the failure (a soak's figures and its verdict)
                print(f"\n{target}\n" + _table(ctx.results) + "\n")
            print(f"{target}: {exc}", file=sys.stderr)
            return 1
        finally:
            ctx.close()
        all_results += results
        print(f"\n{target} ({time.monotonic() - started:.0f} s)")
        print(_table(results) + "\n")
    if args.json:
        args.json.write_text(json.dumps(all_results, indent=2) + "\n")
    return 0


def _table(results: list[dict]) -> str:
    return format_table(results, [c for c in SUMMARY_COLUMNS if any(c in r for r in results)])


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("interrupted; servers stopped", file=sys.stderr)
        sys.exit(130)
