"""The kernel's Idempotency-Key record (merchant_platform/idempotency.py): the table is named after
the service like finance's and payment's, and the first answer's status is kept."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("inventory", "0003_idempotency_key")]

    operations = [
        migrations.AlterModelTable(name="idempotencykey", table="inventory_idempotency_key"),
        migrations.AlterField(model_name="idempotencykey", name="operation", field=models.CharField(max_length=64)),
        migrations.AddField(model_name="idempotencykey", name="response_status", field=models.PositiveSmallIntegerField(blank=True, null=True)),
        migrations.RunSQL(
            "UPDATE inventory_idempotency_key SET response_status = 201 WHERE result_id IS NOT NULL;"
            "UPDATE inventory_idempotency_key SET operation = 'stock.adjust' WHERE operation = 'adjustment';"
            "UPDATE inventory_idempotency_key SET operation = 'purchase-orders.create' WHERE operation = 'purchase-order';",
            migrations.RunSQL.noop,
        ),
        migrations.AddIndex(model_name="idempotencykey", index=models.Index(fields=["started_at"], name="inventory_idempotency_started")),
    ]
