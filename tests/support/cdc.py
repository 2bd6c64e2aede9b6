"""The CDC relay in tests: a unique replication slot per test, and a relay of commerce's tables.
A pytest plugin (tests/conftest.py loads it)."""

from __future__ import annotations

import uuid

import pytest

from merchant_platform.cdc import Capture
from merchant_platform.cdc.relay import CdcRelay, connect, drop_slot


@pytest.fixture
def slot():
    """A unique slot name (slots are cluster-wide); the slot and its publication are dropped after the
    test. Every alias is the one test database, so any alias reaches them."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    yield name
    with connect("default") as conn:
        drop_slot(conn, name)


def commerce_relay(slot: str, captures: list[Capture], **options) -> CdcRelay:
    """A relay of commerce's tables (its server name in the envelopes), streaming from now on."""
    return CdcRelay(alias="commerce", slot=slot, captures=captures, server_name="commerce", **{"snapshot_mode": "never", **options})
