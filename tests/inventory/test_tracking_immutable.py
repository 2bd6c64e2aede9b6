"""Tracking rows are immutable in the database (spec 2.1): an UPDATE or a DELETE through the ORM
(save, queryset update, soft delete, hard delete) or through raw SQL is refused by the trigger.
Rows are written with COPY (merchant_platform.db.copy_insert): snowflake ids, timestamps, and the
unique reference (the idempotency of deductions, receipts, reservations) still hold."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, connections, transaction

from apps.inventory.models import Tracking
from merchant_platform import snowflake
from merchant_platform.db import copy_insert
from tests.inventory.conftest import new_id, new_item

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture
def row():
    new_item(new_id(), on_hand=5)
    return Tracking.objects.latest("id")


def refused(action) -> None:
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic(using="inventory"):
        action()


def test_orm_updates_and_deletes_are_refused(row):
    def save():
        row.delta = 500
        row.save(using="inventory")

    refused(save)
    refused(lambda: Tracking.objects.filter(pk=row.pk).update(delta=500))
    refused(row.delete)  # the soft delete is an UPDATE
    refused(lambda: Tracking.objects.filter(pk=row.pk).delete())
    refused(lambda: Tracking.all_objects.filter(pk=row.pk).hard_delete())
    assert Tracking.objects.get(pk=row.pk).delta == 5


def test_raw_sql_updates_and_deletes_are_refused(row):
    def execute(sql):
        with connections["inventory"].cursor() as cursor:
            cursor.execute(sql, [row.pk])

    refused(lambda: execute("UPDATE tracking SET delta = 500 WHERE id = %s"))
    refused(lambda: execute("DELETE FROM tracking WHERE id = %s"))
    refused(lambda: execute("UPDATE tracking SET deleted_at = now() WHERE id = %s"))
    assert Tracking.objects.get(pk=row.pk).delta == 5


def test_copied_rows_keep_snowflake_ids_timestamps_and_their_unique_reference(row):
    stored = Tracking.objects.get(pk=row.pk)
    assert snowflake.parse(stored.id)["worker_id"] == snowflake.claim().worker_id
    assert stored.created_at == stored.updated_at and stored.deleted_at is None
    twin = Tracking(**{f.attname: getattr(stored, f.attname) for f in Tracking._meta.concrete_fields if not f.primary_key})
    with pytest.raises(IntegrityError), transaction.atomic(using="inventory"):
        copy_insert([twin], using="inventory")  # same operation and reference: refused like an INSERT
    assert Tracking.objects.filter(reference_id=stored.reference_id, operation=stored.operation).count() == 1
