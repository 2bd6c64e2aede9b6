"""merchant_platform.parsers.JSONParser and merchant_platform.renderers.JSONRenderer give what DRF's
give: the same data and errors from a body, the same bytes from data."""

from __future__ import annotations

import datetime
import decimal
import io
import uuid

import pytest
from django.utils.translation import gettext_lazy
from rest_framework import parsers, renderers
from rest_framework.exceptions import ParseError

from merchant_platform.parsers import JSONParser
from merchant_platform.renderers import JSONRenderer

BODIES = [
    (b'{"name": "Ada", "tags": ["a", 1, 2.5, true, null], "nested": {"x": {}}}', None),
    ('{"name": "Zoë ✓ 🚀 \\u2028"}'.encode(), None),
    ('{"name": "Zoë"}'.encode("latin-1"), "latin-1"),
    ('{"name": "Zoë"}'.encode("utf-16"), "utf-16"),
    (b"[]", None),
    (b'"just a string"', None),
]
BAD_BODIES = [
    (b'{"name": ', None),  # truncated
    (b'{"a": NaN}', None),  # not JSON (strict)
    (b'{"a": Infinity}', None),
    (b'{"a": "\xff\xfe"}', None),  # not UTF-8
    (b"", None),
    (b'{"a": 1}', "bz2_codec"),  # a bytes-to-bytes codec: refused before decoding
    (b'{"a": 1}', "no-such-charset"),
]


def parse(parser, body: bytes, encoding: str | None):
    context = {} if encoding is None else {"encoding": encoding}
    try:
        return parser.parse(io.BytesIO(body), "application/json", context)
    except ParseError as exc:
        return ("ParseError", str(exc.detail))


@pytest.mark.parametrize(("body", "encoding"), BODIES + BAD_BODIES)
def test_a_body_parses_to_what_drf_parses_it_to(body, encoding):
    assert parse(JSONParser(), body, encoding) == parse(parsers.JSONParser(), body, encoding)


@pytest.mark.parametrize(("body", "encoding"), BAD_BODIES)
def test_a_bad_body_is_a_parse_error(body, encoding):
    assert parse(JSONParser(), body, encoding)[0] == "ParseError"


DATA = [
    {"id": "382567179885215744", "name": "Zoë ✓ 🚀", "ok": True, "none": None, "n": [1, 2.5, -3]},
    {"line separators": "a\u2028b\u2029c", "html": "</script><b>"},
    {"when": datetime.datetime(2026, 11, 22, 0, 30, 5, 123456, tzinfo=datetime.UTC), "day": datetime.date(2026, 11, 22)},
    {"amount": decimal.Decimal("12.50"), "uuid": uuid.UUID(int=7), "lazy": gettext_lazy("Not found.")},
    [],
    "a string",
    None,
]
MEDIA_TYPES = [None, "application/json", "application/json; indent=4", "application/json; indent=0"]


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("media_type", MEDIA_TYPES)
@pytest.mark.parametrize("context", [None, {}, {"indent": 2}])
def test_data_renders_to_the_bytes_drf_renders(data, media_type, context):
    assert JSONRenderer().render(data, media_type, context) == renderers.JSONRenderer().render(data, media_type, context)


def test_a_float_json_cannot_hold_is_refused_as_drf_refuses_it():
    with pytest.raises(ValueError, match="Out of range float values") as ours:
        JSONRenderer().render({"x": float("nan")}, "application/json", {})
    with pytest.raises(ValueError, match="Out of range float values") as drfs:
        renderers.JSONRenderer().render({"x": float("nan")}, "application/json", {})
    assert str(ours.value) == str(drfs.value)
