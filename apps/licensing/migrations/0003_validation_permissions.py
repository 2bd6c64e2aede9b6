"""Spec 9: licensing's permission seeds, second slice (validation by fingerprint)."""

from django.db import migrations

from apps.licensing import seeds


def seed_permissions(apps, schema_editor):
    seeds.seed_permissions("0003")


def unseed_permissions(apps, schema_editor):
    seeds.seed_permissions("0002")


class Migration(migrations.Migration):
    dependencies = [("licensing", "0002_license_event_append_only_and_free_trial")]

    operations = [migrations.RunPython(seed_permissions, unseed_permissions)]
