"""Content negotiation: DRF's, with its commonest answer computed directly."""

from __future__ import annotations

from rest_framework.negotiation import DefaultContentNegotiation


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's DefaultContentNegotiation, except that a request without a `format` override (no
    suffix, no query string) whose Accept header is absent or `*/*` gets the view's first renderer
    and its media type at once: what DRF answers then, without parsing the header and the renderers'
    media types. Any other request goes through DRF unchanged."""

    def select_renderer(self, request, renderers, format_suffix=None):
        meta = request.META
        if renderers and not format_suffix and not meta.get("QUERY_STRING") and meta.get("HTTP_ACCEPT", "*/*") == "*/*":
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)
