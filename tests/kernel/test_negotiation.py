"""merchant_platform.negotiation.ContentNegotiation answers what DRF's DefaultContentNegotiation answers."""

from __future__ import annotations

import pytest
from django.http import Http404
from django.test import RequestFactory
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request

from merchant_platform.negotiation import ContentNegotiation

ACCEPTS = [None, "*/*", "", "application/json", "application/json; indent=4", "text/html", "text/*", "*/*;q=0.5, text/html", "image/png"]
QUERIES = ["", "format=json", "format=api", "format=xml", "page=2"]
RENDERER_SETS = [[JSONRenderer()], [JSONRenderer(), BrowsableAPIRenderer()], [BrowsableAPIRenderer(), JSONRenderer()]]


def outcome(negotiation, request, renderers, suffix):
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers, suffix)
    except (NotAcceptable, Http404) as exc:
        return type(exc)
    return type(renderer), media_type


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("suffix", [None, "json", "api"])
def test_the_same_renderer_and_media_type_as_drf(accept, query, suffix):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(RequestFactory().get(f"/anything?{query}" if query else "/anything", **headers))
    for renderers in RENDERER_SETS:
        expected = outcome(DefaultContentNegotiation(), request, renderers, suffix)
        assert outcome(ContentNegotiation(), request, renderers, suffix) == expected, (renderers, expected)
