"""Request parsing: DRF's, with the JSON body decoded in one piece."""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json


class JSONParser(parsers.JSONParser):
    """DRF's JSONParser, except that it decodes the whole body and parses the string, instead of
    parsing through a `codecs` stream reader: the same data and the same errors, for less CPU.
    The body is bounded before it gets here (ApiMiddleware, MAX_REQUEST_BODY_BYTES)."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})  # refuses non-text codecs
        try:
            return json.loads(stream.read().decode(encoding), parse_constant=json.strict_constant if self.strict else None)
        except ValueError as exc:  # UnicodeDecodeError included, as with DRF's reader
            raise ParseError(f"JSON parse error - {exc}") from exc
        except RecursionError:  # arrays or objects nested deeper than the parser walks (a small body can do it)
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
