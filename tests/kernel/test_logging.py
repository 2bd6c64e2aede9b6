"""Item 8: one key=value line per request with requestId, method, path, status and duration;
X-Request-Id echoed, generated or replaced; the outgoing client forwards it; request lines are
written in order within LOG_REQUEST_FLUSH_SECONDS."""

from __future__ import annotations

import gc
import logging
import os
import re
import sys
import threading
import time

import pytest

from merchant_platform import http
from merchant_platform.context import bind_request_id, reset_request_id
from merchant_platform.logging import _RENDERER, RequestLineWriter, RequestLogger, StdoutHandler, flush_request_lines
from tests.support.http import JsonHandler, local_server
from tests.support.waiting import patience

REQUEST_LINE = re.compile(
    r"^ts='[^']+' level='info' event='request' logger='merchant_platform\.request' requestId='(?P<id>[^']+)' "
    r"method='(?P<method>[A-Z]+)' path='(?P<path>[^']+)' status=(?P<status>\d{3}) durationMs=(?P<duration>\d+(\.\d+)?)$"
)


def _request_lines(log_lines, path: str) -> list[re.Match]:
    return [match for line in log_lines.lines if (match := REQUEST_LINE.match(line)) and match["path"] == path]


def test_a_request_is_one_key_value_line(client, log_lines):
    response = client.get("/healthz", headers={"X-Request-Id": "order-42.retry_1:a"})
    assert response["X-Request-Id"] == "order-42.retry_1:a"

    (line,) = _request_lines(log_lines, "/healthz")
    assert (line["id"], line["method"], line["status"]) == ("order-42.retry_1:a", "GET", "200")
    assert float(line["duration"]) >= 0


def test_a_request_without_an_id_gets_a_fresh_one(client, log_lines):
    first, second = client.get("/healthz"), client.get("/healthz")
    assert re.fullmatch(r"[0-9a-f]{32}", first["X-Request-Id"])
    assert first["X-Request-Id"] != second["X-Request-Id"]
    assert [line["id"] for line in _request_lines(log_lines, "/healthz")] == [first["X-Request-Id"], second["X-Request-Id"]]


@pytest.mark.parametrize("malicious", ["abc\ninjected event='forged'", "x" * 129, "id with spaces", "ünïcode", ""])
def test_a_malicious_request_id_is_replaced(client, log_lines, malicious):
    response = client.get("/healthz", headers={"X-Request-Id": malicious})
    replaced = response["X-Request-Id"]
    assert replaced != malicious and re.fullmatch(r"[0-9a-f]{32}", replaced)
    assert [line["id"] for line in _request_lines(log_lines, "/healthz")] == [replaced]
    assert not any("forged" in line for line in log_lines.lines)


def test_error_lines_carry_the_request_id_and_the_problem_body_too(client, log_lines, kernel_urls):
    response = client.get("/kernel-test/boom", headers={"X-Request-Id": "trace-500"})
    assert response.status_code == 500
    assert response.json()["requestId"] == "trace-500"
    (line,) = _request_lines(log_lines, "/kernel-test/boom")
    assert line["status"] == "500"
    unhandled = log_lines.matching("event='request.unhandled_exception'", "requestId='trace-500'")
    assert len(unhandled) == 1


class _HeaderEcho(JsonHandler):
    def answer(self, path):
        return 200, {"requestId": self.headers.get("X-Request-Id")}


@pytest.fixture
def header_echo_url():
    with local_server(_HeaderEcho) as url:
        yield f"{url}/echo"


def test_the_outgoing_client_forwards_the_request_id(header_echo_url):
    token = bind_request_id("outgoing-1")
    try:
        assert http.session().get(header_echo_url).json() == {"requestId": "outgoing-1"}
        # A caller's own header wins.
        assert http.session().get(header_echo_url, headers={"X-Request-Id": "explicit"}).json() == {"requestId": "explicit"}
    finally:
        reset_request_id(token)
    assert http.session().get(header_echo_url).json() == {"requestId": None}


def test_a_view_calling_another_service_forwards_its_request_id(client, kernel_urls, header_echo_url):
    response = client.get("/kernel-test/forward", {"url": header_echo_url}, headers={"X-Request-Id": "hop-1"})
    assert response.json() == {"requestId": "hop-1"}


class RecordingStream:
    """A stdout that records each write and what each flush pushed out."""

    def __init__(self):
        self.writes: list[str] = []
        self.flushed: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        self.flushed = list(self.writes)


def test_the_request_line_is_written_with_each_line_when_asked(monkeypatch):
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    RequestLineWriter(0).msg("event='request' one")
    assert stream.flushed == ["event='request' one\n"]


def test_request_lines_wait_in_the_writer_and_leave_in_order_in_one_write(monkeypatch):
    """Not in stdout's buffer: under PYTHONUNBUFFERED=1 each write to sys.stdout is a system call."""
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    writer = RequestLineWriter(0.05)
    for number in range(3):
        writer.msg(f"line {number}")
    assert stream.writes == []
    deadline = time.monotonic() + 5
    while not stream.flushed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.flushed == ["line 0\nline 1\nline 2\n"]


def test_a_full_buffer_is_written_at_once(monkeypatch):
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    writer = RequestLineWriter(3600)
    for number in range(RequestLineWriter.MAX_PENDING_LINES):
        writer.msg(f"line {number}")
    assert len(stream.flushed) == 1
    assert stream.flushed[0].count("\n") == RequestLineWriter.MAX_PENDING_LINES


def test_a_dropped_writer_writes_its_lines_and_its_flusher_ends(monkeypatch):
    """A writer goes with its middleware (each test client builds one): its thread must go too."""
    gc.collect()  # earlier tests' writers go, and their lines, to their own stdout
    flush_request_lines()
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    before = set(threading.enumerate())
    writer = RequestLineWriter(0.05)
    writer.msg("the last line")
    (flusher,) = (thread for thread in set(threading.enumerate()) - before if thread.name == "request-log-flush")
    del writer
    gc.collect()
    assert stream.writes == ["the last line\n"]
    flusher.join(timeout=patience(1))
    assert not flusher.is_alive()


def test_other_log_lines_come_after_the_request_lines_before_them(monkeypatch):
    flush_request_lines()  # earlier tests' request lines go to their own stdout
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    writer = RequestLineWriter(3600)
    writer.msg("event='request' first")
    handler = StdoutHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.emit(logging.makeLogRecord({"msg": "second", "levelno": logging.WARNING}))
    assert stream.writes == ["event='request' first\n", "second\n"]


def test_a_forked_child_does_not_write_its_parents_pending_lines(monkeypatch):
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    writer = RequestLineWriter(3600)
    writer.msg("the parent's line")
    child = os.fork()
    if child == 0:
        os._exit(0 if writer._pending == [] else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    writer.flush()
    assert stream.writes == ["the parent's line\n"]


@pytest.mark.parametrize("request_id", ["0123456789abcdef", None])
@pytest.mark.parametrize("path", ["/v1/api/outreach/healthz", "/v1/api/o'ut\"reach/\u00fc\\x"])
def test_the_request_line_is_the_line_structlog_renders(monkeypatch, request_id, path):
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    token = bind_request_id(request_id)
    try:
        RequestLogger("merchant_platform.request").line(method="GET", path=path, status=404, duration_ms=1.5)
    finally:
        reset_request_id(token)
    line = stream.flushed[0].rstrip("\n")
    ts = re.match(r"^ts='([^']+)'", line)[1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", ts)
    event = {"ts": ts, "level": "info", "event": "request", "logger": "merchant_platform.request"}
    if request_id is not None:
        event["requestId"] = request_id
    event |= {"method": "GET", "path": path, "status": 404, "durationMs": 1.5}
    assert line == _RENDERER(None, "info", event)


def test_no_request_line_below_the_configured_level(monkeypatch):
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(logging.getLogger("quiet.request"), "level", logging.WARNING)
    RequestLogger("quiet.request").line(method="GET", path="/", status=200, duration_ms=0.1)
    assert stream.writes == []


def test_flushing_while_other_threads_create_writers_never_fails():
    """Every log line flushes the request writers; a thread creating one meanwhile (a new request
    logger) must not break that copy: it once raised in a Kafka client's IO thread. Without the
    copy's retry this fails within a tenth of a second; the flusher stops at a deadline, not after a
    number of rounds, so a slow machine makes the test no longer."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def create() -> None:
        alive: list[RequestLineWriter] = []
        while not stop.is_set():
            alive.append(RequestLineWriter(60))
            del alive[:-200]

    def flush() -> None:
        deadline = time.monotonic() + 1.0
        try:
            while time.monotonic() < deadline:
                flush_request_lines()
        except BaseException as exc:  # the failure is the result
            failures.append(exc)

    creators = [threading.Thread(target=create) for _ in range(2)]
    for thread in creators:
        thread.start()
    flusher = threading.Thread(target=flush)
    flusher.start()
    flusher.join()
    stop.set()
    for thread in creators:
        thread.join()
    assert failures == []
