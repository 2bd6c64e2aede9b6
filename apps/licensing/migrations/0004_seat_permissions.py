"""Spec 9: licensing's permission seeds, third slice (an owner frees seats)."""

from django.db import migrations

from apps.licensing import seeds


def seed_permissions(apps, schema_editor):
    seeds.seed_permissions("0004")


def unseed_permissions(apps, schema_editor):
    seeds.seed_permissions("0003")


class Migration(migrations.Migration):
    dependencies = [("licensing", "0003_validation_permissions")]

    operations = [migrations.RunPython(seed_permissions, unseed_permissions)]
