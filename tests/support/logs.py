"""The log lines a test produced, as the platform renders them. A pytest plugin (tests/conftest.py
loads it) for `log_lines`."""

from __future__ import annotations

import io
import logging

import pytest

from merchant_platform.logging import flush_request_lines, key_value_formatter


class LogCapture:
    """Lines rendered by the platform's key=value formatter, as they would reach stdout, plus what
    was printed to stdout or stderr directly (the request lines: merchant_platform.logging.RequestLogger)."""

    def __init__(self, capsys):
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(key_value_formatter())
        self.capsys = capsys
        self.printed: list[str] = []

    @property
    def lines(self) -> list[str]:
        flush_request_lines()
        captured = self.capsys.readouterr()
        self.printed += captured.out.splitlines() + captured.err.splitlines()
        return self.stream.getvalue().splitlines() + self.printed

    def matching(self, *fragments: str) -> list[str]:
        return [line for line in self.lines if all(fragment in line for fragment in fragments)]


@pytest.fixture
def log_lines(capsys):
    capture = LogCapture(capsys)
    root = logging.getLogger()
    root.addHandler(capture.handler)
    try:
        yield capture
    finally:
        root.removeHandler(capture.handler)
