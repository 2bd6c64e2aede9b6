"""merchant_platform.models.insert: the row save(force_insert=True) writes, with a statement built once
per model and alias; save() itself where that does more than one plain INSERT."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Value
from django.db.models.functions import Upper
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from merchant_platform.models import _INSERT_STATEMENTS, insert
from tests.kernel.sample.models import Widget

pytestmark = pytest.mark.django_db(databases="__all__")
ALIAS = settings.DATABASE_APP_ALIASES["kernel_sample"]  # the first active service's alias


def stored(widget: Widget) -> dict:
    return Widget.all_objects.using(ALIAS).filter(pk=widget.pk).values().get()


def test_the_row_is_the_one_save_writes():
    parent = Widget.objects.create(name="parent")
    before = timezone.now()
    saved = Widget(name="gear", quantity=3, parent=parent, created_by=42)
    saved.save(force_insert=True, using=ALIAS)
    inserted = Widget(name="gear", quantity=3, parent=parent, created_by=42)
    insert(inserted, using=ALIAS)

    saved_row, inserted_row = stored(saved), stored(inserted)
    assert inserted.pk != saved.pk and isinstance(inserted.pk, int) and inserted_row["id"] == inserted.pk
    for row in (saved_row, inserted_row):
        del row["id"]
        assert before <= row.pop("created_at") <= row.pop("updated_at") <= timezone.now()
    assert (
        inserted_row
        == saved_row
        == {
            "deleted_at": None,
            "created_by": 42,
            "name": "gear",
            "quantity": 3,
            "parent_id": parent.pk,
        }
    )
    # The instance ends as save() leaves it: timestamps set on it, stored on the alias.
    assert (inserted.created_at, inserted.updated_at) == (stored(inserted)["created_at"], stored(inserted)["updated_at"])
    assert (inserted._state.adding, inserted._state.db) == (False, ALIAS)
    assert _INSERT_STATEMENTS[(Widget, ALIAS)] is not None  # the plain INSERT, not save()


def test_defaults_and_the_alias_from_the_router():
    widget = Widget(name="plain")
    widget.id = None  # the snowflake default is taken at save time too
    insert(widget)

    row = stored(widget)
    assert row["id"] == widget.pk and widget.pk > 0
    assert (row["quantity"], row["deleted_at"], row["created_by"], row["parent_id"]) == (0, None, None, None)
    assert widget._state.db == ALIAS
    # A soft-deleted row is written as given, and hidden from the default manager as usual.
    gone = Widget(name="gone", deleted_at=timezone.now())
    insert(gone, using=ALIAS)
    assert stored(gone)["deleted_at"] == gone.deleted_at
    assert not Widget.objects.filter(pk=gone.pk).exists()


def test_a_failed_insert_marks_the_transaction_for_rollback_as_save_does():
    widget = Widget(name="first")
    insert(widget, using=ALIAS)
    with transaction.atomic(using=ALIAS):
        with pytest.raises(IntegrityError):
            insert(Widget(id=widget.pk, name="duplicate"), using=ALIAS)
        assert connections[ALIAS].needs_rollback


def test_an_expression_value_goes_through_save():
    widget = Widget(name=Upper(Value("loud")))
    insert(widget, using=ALIAS)
    assert stored(widget)["name"] == "LOUD"


def test_with_model_signal_receivers_it_is_save():
    seen = []

    def before(sender, instance, **kwargs):
        seen.append(("pre", instance.name))

    def after(sender, instance, created, **kwargs):
        seen.append(("post", instance.name, created))

    pre_save.connect(before, sender=Widget)
    post_save.connect(after, sender=Widget)
    try:
        insert(Widget(name="watched"), using=ALIAS)
    finally:
        pre_save.disconnect(before, sender=Widget)
        post_save.disconnect(after, sender=Widget)
    assert seen == [("pre", "watched"), ("post", "watched", True)]
    assert Widget.objects.filter(name="watched").exists()
