"""The audit trail becomes append-only in the database, and the free-trial policy is seeded."""

from django.db import migrations

from apps.licensing import seeds

APPEND_ONLY = """
CREATE OR REPLACE FUNCTION licensing_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'license events are append-only (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER licensing_event_append_only BEFORE UPDATE OR DELETE ON licensing_licenseevent
    FOR EACH ROW EXECUTE FUNCTION licensing_event_append_only();
"""
DROP_APPEND_ONLY = """
DROP TRIGGER IF EXISTS licensing_event_append_only ON licensing_licenseevent;
DROP FUNCTION IF EXISTS licensing_event_append_only();
"""


def seed_free_trial(apps, schema_editor):
    seeds.seed_free_trial_policy(policy_model=apps.get_model("licensing", "Policy"))


class Migration(migrations.Migration):
    dependencies = [("licensing", "0001_initial")]

    operations = [
        migrations.RunSQL(APPEND_ONLY, DROP_APPEND_ONLY),
        migrations.RunPython(seed_free_trial, migrations.RunPython.noop),
    ]
