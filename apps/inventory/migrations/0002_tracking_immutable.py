"""Tracking rows are immutable (spec 2.1, docs/architecture.md section 10): the database refuses every
UPDATE and DELETE of `tracking`, whoever sends it (the ORM, a soft delete, raw SQL). TRUNCATE, an
operator's whole-table reset (and the test suite's flush), is left to privileges."""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION tracking_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'inventory tracking rows are immutable (% refused)', TG_OP
        USING ERRCODE = 'check_violation';
END;
$$;
CREATE TRIGGER tracking_immutable BEFORE UPDATE OR DELETE ON tracking
    FOR EACH ROW EXECUTE FUNCTION tracking_refuse_change();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS tracking_immutable ON tracking;
DROP FUNCTION IF EXISTS tracking_refuse_change();
"""


class Migration(migrations.Migration):
    dependencies = [("inventory", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
