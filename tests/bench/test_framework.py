"""The benchmark framework (scripts/benchmarks): wrk scripts, results, and one short real measurement."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchmarks.framework import Context, Request, ServerSpec, format_table, wrk_script


def test_lua_strings_hold_any_text_verbatim():
    script = wrk_script([Request("/a", "POST", '\n{"x": "]]"}', (("Content-Type", "application/json"),)), Request("/b")])
    assert '[=[\n\n{"x": "]]"}]=]' in script  # a level above the body's "]]", and Lua's dropped first newline restored
    assert "prepared[2] = wrk.format([[GET]], [[/b]], {}, nil)" in script
    assert "BENCH_JSON" in script


def test_single_request_is_set_once_not_per_request():
    script = wrk_script([Request("/x", "POST", "{}", (("A", "b"),))])
    assert "wrk.method = [[POST]]" in script
    assert "request = function" not in script


def test_median_run_reports_spread_and_every_failure():
    runs = [{"rps": 3.0, "errors": 1, "non_2xx": 0}, {"rps": 1.0, "errors": 0, "non_2xx": 2}, {"rps": 2.0, "errors": 0, "non_2xx": 0}]
    result = Context._median(runs, "rps")
    assert (result["rps"], result["rps_min"], result["rps_max"], result["runs"]) == (2.0, 1.0, 3.0, 3)
    assert (result["errors"], result["non_2xx"]) == (1, 2)


def test_table_aligns_columns():
    table = format_table([{"name": "a", "rps": 1234.5}, {"name": "long name", "rps": 7.0}], ["name", "rps"])
    lines = table.splitlines()
    assert lines[0].startswith("name") and "1,234.5" in lines[2] and len({len(line) for line in lines}) == 1


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_measures_a_real_server_and_stops_it():
    ctx = Context(target="base", duration=1, warmup=0, connections=4, verbose=False)
    try:
        with ctx.server(
            ServerSpec("granian", "wsgi", workers=1), "benchmarks.bare:wsgi_app", settings_module="benchmarks.bare_django", ready_path="/"
        ) as url:
            result = ctx.load("bare", url + "/")
            process = ctx._processes[-1]
        assert result["requests"] > 0 and result["rps"] > 0
        assert result["errors"] == 0 and result["non_2xx"] == 0
        assert result["p99_ms"] >= result["p50_ms"] > 0
        assert not process.alive()
    finally:
        ctx.close()


@pytest.mark.parametrize(("prefix", "suffix"), [("", ""), ("dev-", "-dev")])
def test_a_run_publishes_and_consumes_on_kafka_names_of_its_own(prefix, suffix):
    """A run beside a development platform on the same broker never uses that platform's topics or
    consumer groups: both are derived from the environment's and always differ from them."""
    platform = {"KAFKA_TOPIC_PREFIX": prefix, "KAFKA_CONSUMER_GROUP_SUFFIX": suffix, "DATABASE_URL": "postgres://x/y"}
    ctx = Context(target="payment", env=dict(platform), verbose=False)
    try:
        server = ctx.server_env()
        assert server["KAFKA_TOPIC_PREFIX"] == f"{prefix}bench." and server["KAFKA_CONSUMER_GROUP_SUFFIX"] == f"{suffix}-bench"
        again = Context(target="payment", env=dict(server), verbose=False)  # a context made inside a run keeps the run's names
        assert again.env["KAFKA_TOPIC_PREFIX"] == server["KAFKA_TOPIC_PREFIX"]
        again.close()
    finally:
        ctx.close()
