"""Seeds: the free-trial policy and licensing's permission seeds, delivered by migrations 0001, 0003
and 0004 (spec 9) and re-run idempotently by `manage.py seed` / RUN_MODE=migrate."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from django.db.migrations.loader import MigrationLoader

from apps.licensing import seeds
from apps.licensing.models import Policy
from merchant_platform.models import PolicyDefinition


def licensing_grants() -> set[tuple[str, str]]:
    rows = PolicyDefinition.objects.using("default").filter(source="licensing", kind=PolicyDefinition.Kind.PERMISSION)
    return {(row.subject_id, f"{row.resource}.{row.action}") for row in rows}


def expected(migration: str) -> set[tuple[str, str]]:
    return {(role, permission) for role, permissions in seeds.baseline_through(migration).items() for permission in permissions}


def test_the_permission_seeds_belong_to_migrations_0001_0003_and_0004():
    assert sorted(seeds.PERMISSION_SEEDS) == ["0001", "0003", "0004"]
    loader = MigrationLoader(None, ignore_no_migrations=True)
    names = {name for app, name in loader.disk_migrations if app == "licensing"}
    for number in seeds.PERMISSION_SEEDS:
        assert any(name.startswith(number) for name in names)


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_migrations_deliver_the_permission_seeds():
    try:
        call_command("migrate", "licensing", "0002", database="licensing", verbosity=0)
        assert licensing_grants() == expected("0001")
        call_command("migrate", "licensing", "0003", database="licensing", verbosity=0)
        assert licensing_grants() == expected("0003")
        assert ("CASHIER", "licensing.License.validate") in licensing_grants()
        assert ("OWNER", "licensing.Activation.delete") not in licensing_grants()
    finally:
        call_command("migrate", "licensing", database="licensing", verbosity=0)
    assert licensing_grants() == expected("0004")
    assert ("OWNER", "licensing.Activation.delete") in licensing_grants()


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_seeds_rerun_idempotently():
    call_command("seed", verbosity=0)
    grants = PolicyDefinition.objects.using("default").filter(source="licensing").count()
    policy = Policy.objects.get(code=Policy.FREE_TRIAL_CODE)
    Policy.objects.filter(pk=policy.pk).update(activation_limit=3)  # an operator's edit survives
    call_command("seed", verbosity=0)
    seeds.run()
    assert PolicyDefinition.objects.using("default").filter(source="licensing").count() == grants
    assert licensing_grants() == expected("0004")
    assert Policy.objects.get(code=Policy.FREE_TRIAL_CODE).activation_limit == 3
    assert Policy.all_objects.filter(code=Policy.FREE_TRIAL_CODE).count() == 1


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_deleted_free_trial_policy_is_restored():
    seeds.run()
    Policy.objects.get(code=Policy.FREE_TRIAL_CODE).delete()
    assert not Policy.objects.filter(code=Policy.FREE_TRIAL_CODE).exists()
    seeds.run()
    trial = Policy.objects.get(code=Policy.FREE_TRIAL_CODE)
    assert trial.is_trial and trial.activation_limit == 1


@pytest.mark.slow
@pytest.mark.django_db(databases="__all__", transaction=True)
def test_run_mode_migrate_of_the_licensing_deployment_reseeds():
    """A split-mode licensing process with RUN_MODE=migrate migrates (nothing is left to apply here)
    and re-runs the seeds that were removed; running it twice changes nothing."""
    database = connections["default"].settings_dict["NAME"]
    env = {
        **os.environ,
        "RUN_MODE": "migrate",
        "APP_SERVICE": "licensing",
        "APP_ENV": "test",
        "DJANGO_SETTINGS_MODULE": "settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{database}",
    }
    Policy.all_objects.filter(code=Policy.FREE_TRIAL_CODE).hard_delete()
    PolicyDefinition.all_objects.using("default").filter(source="licensing").hard_delete()
    for _ in range(2):
        completed = subprocess.run(
            [sys.executable, "manage.py", "serve"], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=180, check=False
        )
        assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
        assert licensing_grants() == expected("0004")
        assert Policy.objects.filter(code=Policy.FREE_TRIAL_CODE).count() == 1
