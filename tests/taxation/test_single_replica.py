"""Spec 1.4: taxation runs as one replica with the fixed worker id 13 from APP_ENV_SNOWFLAKE_WORKER_ID;
a second taxation process configured with the same id refuses to start (the kernel's lease)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis
from django.conf import settings

from merchant_platform import snowflake
from tests.kernel.conftest import manage_command, python_command, run_all, start_at_root

TAXATION = {"APP_SERVICE": "taxation", "APP_ENV_SNOWFLAKE_WORKER_ID": "13"}

# Starts as every taxation process does, reports its worker id, and lives until stdin closes.
HOLD = """
import sys, django
django.setup()
from merchant_platform import lifecycle, snowflake
lifecycle.process_start("taxation-test")
print(f"WORKER_ID={snowflake.claim().worker_id}", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def lease_client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


@pytest.mark.slow
def test_a_second_taxation_process_with_worker_id_13_refuses_to_start(lease_client):
    if lease_client.exists(snowflake.LEASE_KEY.format(13)):
        pytest.fail("worker id 13 is leased by another process in this Redis database")
    holder = start_at_root(python_command(HOLD), TAXATION, stdin=subprocess.PIPE)
    try:
        started = next((line.strip() for line in holder.stdout if line.startswith("WORKER_ID=")), None)
        assert started == "WORKER_ID=13", holder.stderr.read()
        # The replica's real entry points: the product stream consumer and a second API-side process.
        consumer, second = run_all(
            (manage_command("consume", "--service", "taxation"), TAXATION),
            (python_command(HOLD), TAXATION),
            timeout=60,
        )
    finally:
        holder.stdin.close()
        try:
            holder.wait(timeout=10)
        finally:
            if holder.poll() is None:
                holder.kill()
    for refused in (consumer, second):
        assert refused.returncode == 1, (refused.stdout, refused.stderr)
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, refused.stderr
        assert lines[0].startswith("merchant-platform: snowflake worker id 13 (APP_ENV_SNOWFLAKE_WORKER_ID) is already leased by ")
        assert "WORKER_ID=" not in refused.stdout
    assert not lease_client.exists(snowflake.LEASE_KEY.format(13))  # released by the holder's exit


def test_taxation_declares_worker_id_13_from_its_own_variable():
    from merchant_platform.registry import get_service

    service = get_service("taxation")
    assert (service.worker_id, service.worker_id_env) == (13, "APP_ENV_SNOWFLAKE_WORKER_ID")
    assert sys.modules["apps.taxation.apps"].TaxationConfig.worker_id == 13
