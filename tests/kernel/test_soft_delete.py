"""Item 6: soft delete on the base model, its managers, and DRF's destroy."""

from __future__ import annotations

import pytest

from tests.kernel.sample.models import Widget

pytestmark = pytest.mark.django_db(databases="__all__")


def test_instance_delete_marks_the_row_and_hides_it():
    widget = Widget.objects.create(name="doomed")
    assert widget.delete() == (1, {"kernel_sample.Widget": 1})

    assert not Widget.objects.filter(pk=widget.pk).exists()
    kept = Widget.all_objects.get(pk=widget.pk)
    assert kept.is_deleted and kept.deleted_at is not None

    kept.restore()
    assert Widget.objects.get(pk=widget.pk).deleted_at is None


def test_queryset_delete_is_soft_and_hard_delete_removes():
    widgets = [Widget.objects.create(name=f"w{index}") for index in range(3)]
    assert Widget.objects.filter(name__in=["w0", "w1"]).delete() == 2

    assert list(Widget.objects.values_list("name", flat=True)) == ["w2"]
    assert Widget.all_objects.count() == 3
    assert list(Widget.all_objects.dead().values_list("name", flat=True)) == ["w0", "w1"]
    assert list(Widget.all_objects.alive().values_list("name", flat=True)) == ["w2"]

    Widget.all_objects.filter(name="w0").hard_delete()
    widgets[1].hard_delete()
    assert sorted(Widget.all_objects.values_list("name", flat=True)) == ["w2"]


def test_related_access_still_reaches_a_soft_deleted_parent():
    parent = Widget.objects.create(name="parent")
    child = Widget.objects.create(name="child", parent=parent)
    parent.delete()
    # The base manager sees every row, so a reference never dangles.
    assert Widget.objects.get(pk=child.pk).parent.name == "parent"


def test_drf_destroy_is_soft(client, kernel_urls):
    widget = Widget.objects.create(name="api")
    response = client.delete(f"/kernel-test/widgets/{widget.id}")
    assert response.status_code == 204

    assert Widget.all_objects.get(pk=widget.pk).deleted_at is not None
    gone = client.get(f"/kernel-test/widgets/{widget.id}")
    assert gone.status_code == 404
    assert gone.json()["code"] == "NOT_FOUND"
    assert client.get("/kernel-test/widgets").json()["results"] == []
