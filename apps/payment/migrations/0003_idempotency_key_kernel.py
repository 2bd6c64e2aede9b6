"""The kernel's Idempotency-Key record (merchant_platform/idempotency.py): the scope splits into caller
and operation, the transaction created becomes the result (replayed as it is now instead of a stored
body), and the table is named after the service."""

from django.db import migrations, models

CARRY_OVER = """
UPDATE payment_idempotency_key
   SET caller = left(caller, length(caller) - length(':transactions')),
       result_id = CASE WHEN response_status IS NULL THEN NULL ELSE (response_body->>'id')::bigint END
 WHERE caller LIKE '%:transactions';
DELETE FROM payment_idempotency_key WHERE response_status IS NOT NULL AND result_id IS NULL;
"""


class Migration(migrations.Migration):
    dependencies = [("payment", "0002_idempotencykey")]

    operations = [
        migrations.RemoveConstraint(model_name="idempotencykey", name="idempotency_scope_key_unique"),
        migrations.RemoveIndex(model_name="idempotencykey", name="idempotency_created"),
        migrations.AlterModelTable(name="idempotencykey", table="payment_idempotency_key"),
        migrations.RenameField(model_name="idempotencykey", old_name="scope", new_name="caller"),
        migrations.RenameField(model_name="idempotencykey", old_name="fingerprint", new_name="request_hash"),
        migrations.RenameField(model_name="idempotencykey", old_name="created_at", new_name="started_at"),
        migrations.AlterField(model_name="idempotencykey", name="started_at", field=models.DateTimeField()),
        migrations.AddField(
            model_name="idempotencykey",
            name="operation",
            field=models.CharField(default="transactions.create", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(model_name="idempotencykey", name="result_id", field=models.BigIntegerField(blank=True, null=True)),
        migrations.RunSQL(CARRY_OVER, migrations.RunSQL.noop),
        migrations.RemoveField(model_name="idempotencykey", name="response_body"),
        migrations.AlterField(model_name="idempotencykey", name="response_status", field=models.PositiveSmallIntegerField(blank=True, null=True)),
        migrations.AlterField(model_name="idempotencykey", name="caller", field=models.CharField(max_length=64)),
        migrations.AddConstraint(
            model_name="idempotencykey",
            constraint=models.UniqueConstraint(fields=("caller", "operation", "key"), name="payment_idempotency_key_unique"),
        ),
        migrations.AddIndex(model_name="idempotencykey", index=models.Index(fields=["started_at"], name="payment_idempotency_started")),
    ]
