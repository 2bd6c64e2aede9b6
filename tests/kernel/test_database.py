"""Item 4: one schema per service through an alias per service, `<SERVICE>_DATABASE_URL`, and the
migrate command over every alias."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from django.apps import apps
from django.conf import settings
from django.db import connections

from merchant_platform.db import alias_for_app
from merchant_platform.registry import active_services, all_services, get_service
from tests.kernel.conftest import PROJECT_ROOT, database_url, manage_command, python_command, row_digest_query, run_all
from tests.kernel.sample.models import Widget

# Settings only (no app loading): what the process would connect to.
PRINT_DATABASES = """
import json
from django.conf import settings
print(json.dumps({alias: [db["HOST"], str(db["PORT"]), db["NAME"], db["OPTIONS"].get("options")]
                  for alias, db in settings.DATABASES.items()}))
"""


def _tables_named(cursor, table: str) -> set[str]:
    cursor.execute("SELECT table_schema FROM information_schema.tables WHERE table_name = %s", [table])
    return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(databases="__all__")
def test_a_row_written_through_a_service_alias_lands_in_the_service_schema():
    alias = alias_for_app(Widget._meta.app_label)
    service = get_service(alias)
    widget = Widget.objects.create(name="routed")

    with connections[alias].cursor() as cursor:
        cursor.execute(f'SELECT name FROM "{service.schema}".kernel_sample_widget WHERE id = %s', [widget.id])
        assert cursor.fetchone() == ("routed",)
        assert _tables_named(cursor, Widget._meta.db_table) == {service.schema}
        cursor.execute("SELECT current_schemas(false)")
        assert cursor.fetchone()[0] == [service.schema]
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT to_regclass('public.kernel_sample_widget')")
        assert cursor.fetchone() == (None,)


@pytest.mark.django_db(databases="__all__")
def test_every_service_model_table_lives_in_its_service_schema():
    # A table is expected in exactly the schemas of the services that declare it.
    declared: dict[str, set[str]] = {}
    for service in active_services():
        for model in apps.get_app_config(service.app_label).get_models():
            if model._meta.managed and not model._meta.proxy:
                declared.setdefault(model._meta.db_table, set()).add(service.schema)
    with connections["default"].cursor() as cursor:
        for table, schemas in declared.items():
            assert _tables_named(cursor, table) == schemas, table
        # Django's own tables stay on `default`, in public.
        assert _tables_named(cursor, "django_session") == {"public"}


def test_each_service_has_an_alias_that_sees_only_its_schema():
    for service in active_services():
        options = settings.DATABASES[service.db_alias]["OPTIONS"]
        assert options["options"] == f"-c search_path={service.schema}"
    assert "options" not in settings.DATABASES["default"]["OPTIONS"]


def test_service_database_url_overrides_one_alias_and_split_mode_configures_two():
    overridden, split = (
        json.loads(result.stdout.strip().splitlines()[-1])
        for result in _succeeded(
            run_all(
                (
                    python_command(PRINT_DATABASES),
                    {
                        "DATABASE_URL": "postgres://postgres@db.internal:5432/platform",
                        "OUTREACH_DATABASE_URL": "postgres://outreach@outreach-db.internal:6543/outreach_db",
                    },
                ),
                (python_command(PRINT_DATABASES), {"APP_SERVICE": "ledger"}),
            )
        )
    )
    assert overridden.pop("outreach") == ["outreach-db.internal", "6543", "outreach_db", "-c search_path=outreach"]
    assert set(overridden) == {"default"} | {s.db_alias for s in all_services()} - {"outreach"}
    for alias, (host, port, name, _) in overridden.items():
        assert (host, port, name) == ("db.internal", "5432", "platform"), alias

    assert set(split) == {"default", "ledger"}
    assert split["ledger"][3] == "-c search_path=ledger"


def _succeeded(results):
    for result in results:
        assert result.returncode == 0, result.stderr
    return results


@pytest.fixture
def scratch_database():
    """An empty database of its own, dropped afterwards."""
    name = f"mp_kernel_scratch_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_url("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(database_url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _database_state(database: str) -> dict:
    """Schemas, tables, recorded migrations and a digest of every row (updated_at aside)."""
    with psycopg.connect(database_url(database)) as conn:
        schemas = {row[0] for row in conn.execute("SELECT schema_name FROM information_schema.schemata")}
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2"
        ).fetchall()
        recorded, rows = {}, {}
        for schema, table in tables:
            if table == "django_migrations":
                recorded[schema] = sorted(conn.execute(f'SELECT app, name FROM "{schema}".django_migrations').fetchall())
            rows[f"{schema}.{table}"] = conn.execute(row_digest_query(schema, table)).fetchone()
    return {"schemas": schemas, "tables": tables, "recorded": recorded, "rows": rows}


def _service_migrations(service) -> list[str]:
    return sorted(path.stem for path in Path(PROJECT_ROOT, "apps", service.name, "migrations").glob("[0-9]*.py"))


def _recorded(state: dict, service) -> list[str]:
    return [name for app, name in state["recorded"].get(service.schema, []) if app == service.app_label]


def _model_tables(service) -> set[tuple[str, str]]:
    return {(service.schema, model._meta.db_table) for model in apps.get_app_config(service.app_label).get_models() if model._meta.managed}


def test_run_mode_migrate_and_the_migrate_command_cover_every_alias_idempotently(scratch_database):
    env = {"DATABASE_URL": database_url(scratch_database), "DB_POOL": "false"}
    split = {**env, "APP_SERVICE": "licensing", "RUN_MODE": "migrate"}
    licensing = get_service("licensing")

    # RUN_MODE=migrate in split mode: this service's alias (and `default`) only, then its seeds, exit 0.
    (first,) = run_all((manage_command("serve"), split))
    assert first.returncode == 0, first.stderr
    state = _database_state(scratch_database)
    assert _recorded(state, licensing) == _service_migrations(licensing)
    assert _model_tables(licensing) <= set(state["tables"])
    other_schemas = {schema for s in all_services() if s is not licensing for schema in s.schemas} - {"public"}
    assert not other_schemas & state["schemas"]
    assert "event='seed.done'" in first.stdout

    # `manage.py migrate` in all-in-one mode: every alias, each into its own schema.
    (everything,) = run_all((manage_command("migrate", "--no-input"), env))
    assert everything.returncode == 0, everything.stderr
    state = _database_state(scratch_database)
    assert {"auth", "contenttypes", "admin", "sessions"} <= {app for app, _ in state["recorded"]["public"]}
    for service in all_services():
        assert set(service.schemas) <= state["schemas"], service.name
        assert _recorded(state, service) == _service_migrations(service), service.name
        assert _model_tables(service) <= set(state["tables"]), service.name

    # Both again: nothing to apply, and seeds change nothing.
    again, seeded_again = run_all((manage_command("migrate", "--no-input"), env), (manage_command("serve"), split))
    assert again.returncode == 0, again.stderr
    assert "Applying" not in again.stdout
    assert again.stdout.count("No migrations to apply.") == 1 + len(all_services())
    assert seeded_again.returncode == 0, seeded_again.stderr
    assert _database_state(scratch_database) == state
