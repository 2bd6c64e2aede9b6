"""The API's camelCase names are translated once, at the edge: a serializer field or a list filter
declared under its camelCase name reads, writes and filters the snake_case attribute of the same
words; an explicit `source=`/`field_name=` wins; a serializer of a dict keyed by the API's names
opts out; the values of JSON members are never renamed."""

from __future__ import annotations

import copy
from types import SimpleNamespace

from rest_framework import serializers

from merchant_platform.filters import FilterSet, SnowflakeFilter
from merchant_platform.serializers import BaseSerializer, snake_case
from tests.kernel.sample.models import Widget


class Line(BaseSerializer):
    unitPrice = serializers.IntegerField()


class Order(BaseSerializer):
    merchantId = serializers.IntegerField()
    createdBy = serializers.IntegerField(read_only=True)
    inventoryItemId = serializers.IntegerField(source="item_id")
    lineItems = Line(many=True)
    metadata = serializers.JSONField(required=False)


class Answer(BaseSerializer):
    snake_case_sources = False

    totalCount = serializers.IntegerField()


def test_snake_case_splits_before_each_capital():
    assert snake_case("merchantId") == "merchant_id"
    assert snake_case("unitCostAmount") == "unit_cost_amount"
    assert snake_case("sku") == "sku"


def test_a_camel_case_field_reads_its_snake_case_attribute_and_keeps_an_explicit_source():
    order = SimpleNamespace(
        merchant_id=7, created_by=9, item_id=11, line_items=[SimpleNamespace(unit_price=250)], metadata={"someKey": {"a_b": 1}}
    )

    assert Order(order).data == {
        "merchantId": 7,
        "createdBy": 9,
        "inventoryItemId": 11,
        "lineItems": [{"unitPrice": 250}],
        "metadata": {"someKey": {"a_b": 1}},
    }


def test_camel_case_input_validates_to_snake_case_keys_and_json_values_stay_as_given():
    serializer = Order(
        data={"merchantId": 7, "inventoryItemId": 11, "lineItems": [{"unitPrice": 250}], "metadata": {"someKey": {"a_b": 1}}}
    )

    assert serializer.is_valid(), serializer.errors
    assert serializer.validated_data == {
        "merchant_id": 7,
        "item_id": 11,
        "line_items": [{"unit_price": 250}],
        "metadata": {"someKey": {"a_b": 1}},
    }


def test_strict_input_accepts_the_api_names_only():
    serializer = Order(data={"merchant_id": 7, "merchantId": 7, "inventoryItemId": 11, "lineItems": [], "createdBy": 1})

    assert not serializer.is_valid()
    assert set(serializer.errors) == {"merchant_id", "createdBy"}


def test_the_derived_source_survives_the_deep_copy_of_a_nested_field():
    nested = copy.deepcopy(Order._declared_fields["lineItems"])

    assert nested.source == "line_items"
    assert nested.child.fields["unitPrice"].source == "unit_price"


def test_a_serializer_of_a_dict_keyed_by_the_api_names_opts_out():
    assert Answer({"totalCount": 3}).data == {"totalCount": 3}

    serializer = Answer(data={"totalCount": 3})
    assert serializer.is_valid(), serializer.errors
    assert serializer.validated_data == {"totalCount": 3}


class WidgetFilter(FilterSet):
    createdBy = SnowflakeFilter()
    parentWidget = SnowflakeFilter(field_name="parent_id")
    name = SnowflakeFilter()

    class Meta:
        model = Widget
        fields = ()


def test_a_camel_case_filter_filters_its_snake_case_field_and_keeps_an_explicit_field_name():
    names = {name: declared.field_name for name, declared in WidgetFilter.base_filters.items()}

    assert names == {"createdBy": "created_by", "parentWidget": "parent_id", "name": "name"}
    query = str(WidgetFilter({"createdBy": "5", "parentWidget": "6"}, queryset=Widget.objects.all()).qs.query)
    assert '"created_by" = 5' in query
    assert '"parent_id" = 6' in query
