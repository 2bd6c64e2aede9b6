"""The admin of ledger jobs (read-only; retry and regenerate through the services) and the roles of
a ledger process (spec 1.4): `api` routes, `worker` consumes ledger.generate and sweeps."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from apps.ledger import services
from apps.ledger.models import LedgerJob, OutboxMessage

MERCHANT = 64_001


def job(**fields) -> LedgerJob:
    return services.job_create(merchant_id=MERCHANT, type="GENERAL_LEDGER", format="CSV", period="2025-01", **fields)


@pytest.mark.django_db(databases="__all__")
def test_jobs_are_listed_and_shown_read_only(admin_client):
    row = job()
    assert admin_client.get("/admin/ledger/ledgerjob/").status_code == 200
    page = admin_client.get(f"/admin/ledger/ledgerjob/{row.id}/change/")
    assert page.status_code == 200 and b"GENERAL_LEDGER" in page.content
    assert b"wrapped_key" not in page.content and b"object_key" not in page.content
    assert admin_client.get("/admin/ledger/ledgerjob/add/").status_code == 403


@pytest.mark.django_db(databases="__all__")
def test_retry_and_regenerate_actions_go_through_the_services(admin_client):
    failed, running = job(), job()
    LedgerJob.objects.filter(pk=failed.id).update(status="REJECTED", error_code="JOB_EXECUTION_FAILED")

    response = admin_client.post("/admin/ledger/ledgerjob/", {"action": "retry", "_selected_action": [failed.id, running.id]}, follow=True)

    assert response.status_code == 200
    failed.refresh_from_db()
    assert failed.status == "PENDING" and failed.error_code == ""
    assert OutboxMessage.objects.filter(key=str(failed.id)).count() == 2
    assert b"JOB_IN_PROGRESS" in response.content  # the running job was refused, not changed
    response = admin_client.post("/admin/ledger/ledgerjob/", {"action": "regenerate", "_selected_action": [failed.id]}, follow=True)
    assert b"JOB_IN_PROGRESS" in response.content


def ledger_process_view(roles: str) -> str:
    """What a process with APP_ENV_APPLICATION_ROLES=roles routes and consumes."""
    code = (
        "import django; django.setup()\n"
        "from django.urls import resolve, Resolver404\n"
        "from merchant_platform.messaging.registry import registered_consumers\n"
        "try:\n    resolve('/v1/api/ledger/ledgers'); routed = 'routed'\nexcept Resolver404:\n    routed = 'unrouted'\n"
        "names = [s.name for s in registered_consumers(services={'ledger'})]\n"
        "print(routed, 'consumes' if 'ledger.generate' in names else 'idle')\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "settings.test", "APP_ENV_APPLICATION_ROLES": roles}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_roles_select_routes_and_the_bridge():
    assert ledger_process_view("api") == "routed idle"
    assert ledger_process_view("worker") == "unrouted consumes"
    assert ledger_process_view("api,worker") == "routed consumes"


@pytest.mark.django_db(databases="__all__")
def test_admin_search_by_id_or_merchant_and_by_text(admin_client):
    row = job()
    assert str(row.id).encode() in admin_client.get("/admin/ledger/ledgerjob/", {"q": str(MERCHANT)}).content
    assert admin_client.get("/admin/ledger/ledgerjob/", {"q": "not a number"}).status_code == 200
