"""django-filter pieces every service's lists share: values PostgreSQL can hold, or a 400; a FilterSet
whose camelCase query parameters filter the snake_case fields of the same words."""

from __future__ import annotations

from datetime import UTC, timedelta

import django_filters
import django_filters.filterset
from django import forms

from merchant_platform.serializers import snake_case

MAX_ID = 2**63 - 1  # a bigint column's largest value
# PostgreSQL's timestamptz input takes offsets within ±15:59 (and Python's datetime within ±23:59).
MAX_UTC_OFFSET = timedelta(hours=15, minutes=59)


class SnowflakeFormField(forms.IntegerField):
    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)


class SnowflakeFilter(django_filters.NumberFilter):
    """An id (a snowflake, or another service's id): a whole number a bigint column can hold."""

    field_class = SnowflakeFormField


MAX_IDS_PER_QUERY = 200


class IdListField(django_filters.fields.BaseCSVField):
    """Comma-separated values (each checked by the filter's own field), at most MAX_IDS_PER_QUERY."""

    def clean(self, value):
        if value and len(value) > MAX_IDS_PER_QUERY:
            raise forms.ValidationError(f"At most {MAX_IDS_PER_QUERY} ids.", code="max_length")
        return super().clean(value)


class SnowflakeInFilter(django_filters.BaseInFilter, SnowflakeFilter):
    """Records whose id is one of a comma-separated list (`?ids=1,2,3`): one request for a known set."""

    base_field_class = IdListField


class InstantFormField(django_filters.fields.IsoDateTimeField):
    def to_python(self, value):
        instant = super().to_python(value)
        if instant is not None and instant.utcoffset() is not None and abs(instant.utcoffset()) > MAX_UTC_OFFSET:
            raise forms.ValidationError("The UTC offset must be within ±15:59.", code="invalid")
        try:
            return instant.astimezone(UTC) if instant is not None else None
        except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 has no UTC instant
            raise forms.ValidationError("This instant is out of range.", code="invalid") from None


class InstantFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 instant, compared in UTC; an offset PostgreSQL refuses is a 400."""

    field_class = InstantFormField


def camel_case(name: str) -> str:
    """The camelCase API name of a snake_case field: `created_at` -> `createdAt`."""
    head, *humps = name.split("_")
    return head + "".join(hump.capitalize() for hump in humps)


def ordering(*fields: str | tuple[str, str]) -> django_filters.OrderingFilter:
    """The `ordering` filter over these snake_case fields, each offered under its camelCase name
    (`created_at` as `createdAt`); a (field, name) pair names a field offered under other words."""
    return django_filters.OrderingFilter(
        fields=tuple(field if isinstance(field, tuple) else (field, camel_case(field)) for field in fields)
    )


class SnakeCaseFilterSetMetaclass(django_filters.filterset.FilterSetMetaclass):
    def __new__(mcs, name, bases, attrs):
        # The lists filter on their declared filters only: a Meta that names no fields adds none.
        meta = attrs.get("Meta")
        if meta is not None and not hasattr(meta, "fields") and not hasattr(meta, "exclude"):
            meta.fields = ()
        return super().__new__(mcs, name, bases, attrs)

    @classmethod
    def get_declared_filters(cls, bases, attrs):
        for name, declared in attrs.items():
            if isinstance(declared, django_filters.Filter) and declared.field_name is None:
                declared.field_name = snake_case(name)
        return super().get_declared_filters(bases, attrs)


class FilterSet(django_filters.FilterSet, metaclass=SnakeCaseFilterSetMetaclass):
    """The services' FilterSet: a filter declared under its camelCase query parameter with no
    `field_name` filters the snake_case field of the same words (`merchantId` -> `merchant_id`); one
    that filters another field (`inventoryItemId` on `item_id`, `createdAfter`) names it. A `Meta`
    names the model only: it adds no filters of the model's fields (`fields = ()` by default)."""


class TenantFilterSet(FilterSet):
    """A list of merchant-owned records: `merchantId` filters `merchant_id`."""

    merchantId = SnowflakeFilter()


class CreatedRangeFilterSet(FilterSet):
    """A list filtered by creation instant: `createdAfter` (inclusive) and `createdBefore` (exclusive)."""

    createdAfter = InstantFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = InstantFilter(field_name="created_at", lookup_expr="lt")
