"""The kernel's Idempotency-Key record (merchant_platform/idempotency.py): the voucher becomes the
result, keys are per operation, and the first answer's status is kept."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("finance", "0002_lines_immutable")]

    operations = [
        migrations.RemoveConstraint(model_name="idempotencykey", name="finance_idempotency_key_unique"),
        migrations.RenameField(model_name="idempotencykey", old_name="voucher_id", new_name="result_id"),
        migrations.AddField(
            model_name="idempotencykey",
            name="operation",
            field=models.CharField(default="vouchers.create", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(model_name="idempotencykey", name="response_status", field=models.PositiveSmallIntegerField(blank=True, null=True)),
        migrations.RunSQL(
            "UPDATE finance_idempotency_key SET response_status = 201 WHERE result_id IS NOT NULL",
            migrations.RunSQL.noop,
        ),
        migrations.AddConstraint(
            model_name="idempotencykey",
            constraint=models.UniqueConstraint(fields=("caller", "operation", "key"), name="finance_idempotency_key_unique"),
        ),
        migrations.AddIndex(model_name="idempotencykey", index=models.Index(fields=["started_at"], name="finance_idempotency_started")),
    ]
