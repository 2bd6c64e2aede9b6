"""Spec 9: taxation's baseline role permissions (apps/taxation/seeds.py)."""

from django.db import migrations

from apps.taxation import seeds


def seed_permissions(apps, schema_editor):
    seeds.seed_permissions()


class Migration(migrations.Migration):
    dependencies = [("taxation", "0001_initial")]

    operations = [migrations.RunPython(seed_permissions, migrations.RunPython.noop)]
