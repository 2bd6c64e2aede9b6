"""Posted lines are never edited or deleted (docs/architecture.md section 10): the database refuses it,
whatever the code does. Corrections are new vouchers (a reversal, an adjustment)."""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION finance_transaction_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'finance_transaction rows are immutable (% refused)', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER finance_transaction_immutable BEFORE UPDATE OR DELETE ON finance_transaction
    FOR EACH ROW EXECUTE FUNCTION finance_transaction_refuse_change();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS finance_transaction_immutable ON finance_transaction;
DROP FUNCTION IF EXISTS finance_transaction_refuse_change();
"""


class Migration(migrations.Migration):
    dependencies = [("finance", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
