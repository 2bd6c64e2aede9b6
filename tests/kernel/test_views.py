"""The view bases' own behaviour: one validation idiom, and list-only filtering for ServiceViewSet."""

from __future__ import annotations

import pytest
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from merchant_platform.parsers import JSONParser
from merchant_platform.views import OperatorViewSet, PublicView, ServiceViewSet

factory = APIRequestFactory()


class ChangeSerializer(serializers.Serializer):
    """An update serializer that defaults to partial, as the services' update serializers do."""

    name = serializers.CharField()
    size = serializers.IntegerField(required=False)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class NameSerializer(serializers.Serializer):
    name = serializers.CharField()
    size = serializers.IntegerField(required=False)

    def validate_name(self, value):
        if value == self.context.get("reserved"):
            raise serializers.ValidationError("Taken.")
        return value


def _view(view_class, body=None, action=None):
    view = view_class()
    view.request = Request(factory.post("/", body or {}, format="json"), parsers=[JSONParser()])
    view.action = action
    return view


def test_validated_reads_the_body_or_the_data_given():
    view = _view(PublicView, {"name": "a", "size": "3"})
    assert view.validated(NameSerializer) == {"name": "a", "size": 3}
    assert view.validated(NameSerializer, {"name": "b"}) == {"name": "b"}


def test_validated_keeps_the_serializers_partial_default_and_passes_partial_and_context():
    view = _view(PublicView)
    assert view.validated(ChangeSerializer, {"size": 1}) == {"size": 1}
    assert view.validated(NameSerializer, {"size": 1}, partial=True) == {"size": 1}
    with pytest.raises(ValidationError) as refused:
        view.validated(NameSerializer, {"name": "x"}, context={"reserved": "x"})
    assert "name" in refused.value.detail


def test_validated_refuses_an_invalid_body():
    with pytest.raises(ValidationError) as refused:
        _view(PublicView, {"size": "many"}).validated(NameSerializer)
    assert set(refused.value.detail) == {"name", "size"}


def test_operator_validated_authorizes_the_changes_to_a_record():
    view = _view(OperatorViewSet, {"name": "moved"})
    checked = []
    view.authorize_changes = lambda record, changes: checked.append((record, dict(changes)))
    view.validated(NameSerializer)
    assert checked == []
    record = object()
    assert view.validated(NameSerializer, record=record) == {"name": "moved"}
    assert checked == [(record, {"name": "moved"})]


class MarkingBackend:
    def filter_queryset(self, request, queryset, view):
        return [*queryset, "filtered"]


class SampleViewSet(ServiceViewSet):
    filter_backends = (MarkingBackend,)


class CountingViewSet(SampleViewSet):
    filtered_actions = ("list", "count")


@pytest.mark.parametrize(
    ("view_class", "action", "filtered"),
    [
        (SampleViewSet, "list", True),
        (SampleViewSet, "retrieve", False),
        (SampleViewSet, "partial_update", False),
        (SampleViewSet, "count", False),
        (CountingViewSet, "count", True),
        (CountingViewSet, "retrieve", False),
    ],
)
def test_service_viewset_filters_only_its_filtered_actions(view_class, action, filtered):
    assert _view(view_class, action=action).filter_queryset([]) == (["filtered"] if filtered else [])
