"""The serializer bases copy fields cheaply (merchant_platform.serializers.copy_field) and behave as
DRF's: each instance owns its fields, per-instance changes stay there, validators still run, and
what they accept, refuse and render is what the DRF class with the same fields gives, once both are
strict (StrictFieldsMixin, which every kernel base includes: unknown and read-only keys are refused)."""

from __future__ import annotations

import threading

import pytest
from django.core.validators import MaxValueValidator
from rest_framework import serializers

from merchant_platform.serializers import BaseModelSerializer, BaseSerializer, StrictFieldsMixin, copy_field
from tests.kernel.sample.models import Widget


def no_bananas(value):
    if "banana" in value:
        raise serializers.ValidationError("No bananas.")


def declare(base):
    """The same declared fields on `base`: plain, validated, choice, nested and list fields."""

    class Line(base):
        sku = serializers.CharField(max_length=8)
        quantity = serializers.IntegerField(min_value=1, validators=[MaxValueValidator(99)])

    class Order(base):
        name = serializers.CharField(max_length=20, validators=[no_bananas])
        email = serializers.EmailField()
        status = serializers.ChoiceField(choices=["NEW", "PAID"], default="NEW")
        note = serializers.CharField(required=False, allow_blank=True)
        createdAt = serializers.DateTimeField(source="created_at", read_only=True)
        tags = serializers.ListField(child=serializers.CharField(max_length=5), required=False)
        extra = serializers.JSONField(default={})  # a mutable default
        lines = Line(many=True, required=False)
        first = Line(required=False)

    return Order


class StrictDrfSerializer(StrictFieldsMixin, serializers.Serializer):
    """DRF's plain serializer with the kernel's strictness: the reference the bases are held to."""


PlatformOrder, DrfOrder = declare(BaseSerializer), declare(StrictDrfSerializer)

INPUTS = [
    {"name": "Ada", "email": "ada@example.com"},
    {"name": "Ada", "email": "ada@example.com", "status": "PAID", "note": "", "tags": ["a", "b"]},
    {"name": "Ada", "email": "ada@example.com", "lines": [{"sku": "A-1", "quantity": 2}], "first": {"sku": "B", "quantity": 1}},
    {"name": "a banana", "email": "not an address", "status": "LOST"},
    {"name": "x" * 21, "email": "ada@example.com", "tags": ["toolong"]},
    {"name": "Ada", "email": "ada@example.com", "lines": [{"sku": "A-1", "quantity": 100}], "first": {"sku": "too long sku"}},
    {"name": "nul \x00", "email": "ada@example.com", "note": "surrogate \ud800"},
    {"email": "ada@example.com", "createdAt": "2025-01-01T00:00:00Z"},
    {},
    ["not", "an", "object"],
]


@pytest.mark.parametrize("data", INPUTS)
def test_a_platform_serializer_validates_as_drf_does(data):
    platform, drf = PlatformOrder(data=data), DrfOrder(data=data)

    assert platform.is_valid() == drf.is_valid()
    assert platform.errors == drf.errors
    if not drf.errors:
        assert platform.validated_data == drf.validated_data


def test_a_platform_serializer_renders_as_drf_does():
    order = {
        "name": "Ada",
        "email": "ada@example.com",
        "status": "PAID",
        "note": "n",
        "created_at": "2025-01-02T03:04:05Z",
        "tags": ["a"],
        "extra": {"k": 1},
        "lines": [{"sku": "A-1", "quantity": 2}],
        "first": {"sku": "B", "quantity": 1},
    }
    assert PlatformOrder(order).data == DrfOrder(order).data


def test_each_instance_owns_its_fields_and_their_binding():
    first, second = PlatformOrder(data={}), PlatformOrder(data={})

    for name, field in first.fields.items():
        assert field is not second.fields[name]
        assert field is not PlatformOrder._declared_fields[name]
        assert field.parent is first and second.fields[name].parent is second
        assert field.field_name == name
    # A field that holds fields is deep-copied: its inner field is bound to this instance's copy.
    assert first.fields["tags"].child.parent is first.fields["tags"]
    assert first.fields["lines"].child.parent is first.fields["lines"]
    assert first.fields["lines"].root is first and second.fields["lines"].root is second
    # The class's declared fields are never bound.
    assert all(field.parent is None for field in PlatformOrder._declared_fields.values())


def test_a_change_to_one_instance_s_fields_does_not_reach_the_next_instances():
    def refuse(value):
        raise serializers.ValidationError("tweaked")

    tweaked = PlatformOrder(data={"name": "Ada", "email": "ada@example.com", "status": "PAID"})
    tweaked.fields["note"].read_only = True
    tweaked.fields["name"].validators.append(refuse)
    tweaked.fields["name"].error_messages["required"] = "Name, please."
    tweaked.fields["email"].style["input_type"] = "email"
    tweaked.fields["status"].choices = ["ONLY"]
    assert not tweaked.is_valid()
    assert tweaked.errors == {"name": ["tweaked"], "status": ['"PAID" is not a valid choice.']}

    fresh = PlatformOrder(data={"name": "Ada", "email": "ada@example.com", "note": "x", "status": "PAID"})
    assert fresh.is_valid(), fresh.errors
    assert (fresh.validated_data["note"], fresh.validated_data["status"]) == ("x", "PAID")
    assert fresh.fields["email"].style == {}
    nameless = PlatformOrder(data={"email": "ada@example.com"})
    assert not nameless.is_valid()
    assert nameless.errors == {"name": ["This field is required."]}
    declared = PlatformOrder._declared_fields["name"]
    assert refuse not in declared.validators and declared.error_messages["required"] == "This field is required."


def test_a_mutable_default_is_each_instance_s_own():
    first = PlatformOrder(data={"name": "Ada", "email": "ada@example.com"})
    first.is_valid(raise_exception=True)
    first.validated_data["extra"]["changed"] = True

    second = PlatformOrder(data={"name": "Ada", "email": "ada@example.com"})
    second.is_valid(raise_exception=True)
    assert second.validated_data["extra"] == {} and PlatformOrder._declared_fields["extra"].default == {}


def test_copy_field_keeps_the_state_a_constructor_gave():
    field = serializers.CharField(max_length=3, validators=[no_bananas], help_text="h")
    clone = copy_field(field)

    assert type(clone) is serializers.CharField and clone is not field
    assert (clone.max_length, clone.help_text, clone.required) == (3, "h", True)
    assert clone.validators == field.validators and clone.validators is not field.validators
    with pytest.raises(serializers.ValidationError):
        clone.run_validation("banana")
    with pytest.raises(serializers.ValidationError):
        clone.run_validation("four")


def test_instances_validated_at_once_in_threads_keep_to_their_own_data():
    barrier = threading.Barrier(8)
    results: dict[int, object] = {}

    def work(index: int) -> None:
        serializer = PlatformOrder(data={"name": f"user {index}", "email": f"u{index}@example.com", "tags": [str(index)]})
        barrier.wait()
        for _ in range(200):
            serializer = PlatformOrder(data={"name": f"user {index}", "email": f"u{index}@example.com", "tags": [str(index)]})
            serializer.is_valid(raise_exception=True)
            if serializer.validated_data["name"] != f"user {index}" or serializer.fields["name"].parent is not serializer:
                results[index] = serializer.validated_data
                return
        results[index] = "ok"

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == dict.fromkeys(range(8), "ok")


# --- Model serializers: fields built once per class ---------------------------------------------


class PlatformWidgetSerializer(BaseModelSerializer):
    label = serializers.CharField(source="name", max_length=10)

    class Meta:
        model = Widget
        fields = ("id", "label", "quantity", "parent", "created_by", "created_at")
        read_only_fields = ("created_at",)


class DrfWidgetSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    serializer_field_mapping = BaseModelSerializer.serializer_field_mapping
    serializer_related_field = BaseModelSerializer.serializer_related_field
    label = serializers.CharField(source="name", max_length=10)

    class Meta:
        model = Widget
        fields = ("id", "label", "quantity", "parent", "created_by", "created_at")
        read_only_fields = ("created_at",)


def test_a_model_serializer_builds_its_fields_once_per_class(monkeypatch):
    class Counting(PlatformWidgetSerializer):
        class Meta(PlatformWidgetSerializer.Meta):
            """The parent's Meta: a class of its own, so its fields are built and cached afresh."""

    built = []
    original = BaseModelSerializer.build_field
    monkeypatch.setattr(BaseModelSerializer, "build_field", lambda self, *args: built.append(args[0]) or original(self, *args))

    first, second = Counting(), Counting()
    assert first.fields.keys() == second.fields.keys() == {"id", "label", "quantity", "parent", "created_by", "created_at"}
    Counting().fields  # noqa: B018 (instantiation builds nothing more)
    assert sorted(built) == ["created_at", "created_by", "id", "parent", "quantity"]
    for name, field in first.fields.items():
        assert field is not second.fields[name] and field.parent is first
    # A subclass builds its own fields, not its parent's.
    assert "_built_fields" not in PlatformWidgetSerializer.__dict__ or PlatformWidgetSerializer._built_fields is not Counting._built_fields


@pytest.mark.django_db(databases="__all__")
def test_a_model_serializer_validates_and_renders_as_drf_does():
    parent = Widget.objects.create(name="parent")
    for data in (
        {"label": "gear", "quantity": 3, "parent": str(parent.id)},
        {"label": "x" * 11, "quantity": "many", "parent": "999"},
        {"quantity": 2**40, "parent": "abc"},
        {"label": "gear", "created_at": "2025-01-01T00:00:00Z"},
    ):
        platform, drf = PlatformWidgetSerializer(data=data), DrfWidgetSerializer(data=data)
        assert platform.is_valid() == drf.is_valid(), data
        assert platform.errors == drf.errors
        if not drf.errors:
            assert platform.validated_data == drf.validated_data
    widget = Widget.objects.create(name="child", quantity=4, parent=parent, created_by=7)
    assert PlatformWidgetSerializer(widget).data == DrfWidgetSerializer(widget).data


@pytest.mark.django_db(databases="__all__")
def test_a_change_to_one_model_serializer_s_fields_does_not_reach_the_next_instances():
    tweaked = PlatformWidgetSerializer(data={"label": "gear"})
    tweaked.fields["quantity"].read_only = True
    tweaked.fields["parent"].queryset = Widget.objects.none()
    tweaked.fields["label"].validators.append(no_bananas)
    tweaked.is_valid(raise_exception=True)
    assert "quantity" not in tweaked.validated_data

    fresh = PlatformWidgetSerializer(data={"label": "banana", "quantity": 1})
    assert fresh.is_valid(), fresh.errors
    assert fresh.validated_data["quantity"] == 1
    assert fresh.fields["parent"].queryset is Widget._default_manager


def test_the_bases_add_nothing_to_the_openapi_documents():
    # drf-spectacular describes a serializer without a docstring with its nearest base's docstring.
    assert BaseSerializer.__doc__ is None and BaseModelSerializer.__doc__ is None


def test_the_bases_refuse_unknown_and_read_only_keys():
    order = PlatformOrder(data={"name": "Ada", "email": "ada@example.com", "colour": "red", "createdAt": "2025-01-01T00:00:00Z"})
    assert not order.is_valid()
    assert set(order.errors) == {"colour", "createdAt"}
    widget = PlatformWidgetSerializer(data={"label": "gear", "created_at": "2025-01-01T00:00:00Z"})
    assert not widget.is_valid() and set(widget.errors) == {"created_at"}
