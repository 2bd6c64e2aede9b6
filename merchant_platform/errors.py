"""One error shape for every service: RFC 9457 problem details plus a stable `code`.

    {"type": "https://merchant-platform.dev/problems/validation-error", "title": "Validation error",
     "status": 400, "code": "VALIDATION_ERROR", "detail": "...", "requestId": "...",
     "errors": [{"field": "email", "code": "invalid", "message": "Enter a valid email address."}]}

Services raise the domain errors below (`NotFound`, `InvalidInput`, `Conflict`, `ApiError` with a
code), never DRF's exceptions; views may raise either. This module turns any of them into the
shape, and the middleware does the same for Django-level failures, so no API answers with HTML.
Members a problem adds (`extra`) never replace the standard ones (type, title, status, code,
detail, errors, requestId).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from merchant_platform.context import current_request_id
from merchant_platform.logging import get_logger

log = get_logger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://merchant-platform.dev/problems/"


class ApiError(exceptions.APIException):
    """A business error with a stable code, e.g. `raise JobInProgress()` or
    `raise ApiError("Job is running", code="JOB_IN_PROGRESS", status_code=409)`."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "BAD_REQUEST"
    default_detail = "The request cannot be processed."

    def __init__(self, detail: str | None = None, *, code: str | None = None, status_code: int | None = None, extra: dict | None = None):
        super().__init__(detail or self.default_detail, code or self.default_code)
        if status_code is not None:
            self.status_code = status_code
        self.code = code or self.default_code
        self.extra = extra or {}


class Conflict(ApiError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "CONFLICT"
    default_detail = "The request conflicts with the current state of the resource."


class NotFound(ApiError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "NOT_FOUND"
    default_detail = "No such record."


class InvalidInput(exceptions.ValidationError):
    """Input a service refuses, by field: `InvalidInput({"identifier": "Give an email."})`. Rendered
    like a serializer's validation error (code VALIDATION_ERROR, one entry per field)."""

    def __init__(self, errors: dict[str, str | list[str]]):
        super().__init__({field: [messages] if isinstance(messages, str) else messages for field, messages in errors.items()})


class ServiceUnavailable(ApiError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "SERVICE_UNAVAILABLE"
    default_detail = "A dependency of this service is unavailable; try again later."


def database_unavailable(exc: Exception) -> ServiceUnavailable:
    """A lost or refused database connection (PostgreSQL restarting, a failover): the request did
    not happen (its transaction rolled back), so the client may retry. Django reconnects by itself
    on the next request; nothing needs a restart."""
    # The driver's first line says which failure it was (refused, timed out, closed); it holds no
    # password or data (a connection string's password is never part of psycopg's messages).
    reason = next(iter(str(exc).strip().splitlines()), "")[:200]
    log.warning("database.unavailable", error=type(exc).__name__, reason=reason)
    return ServiceUnavailable("The database is not answering; nothing was written. Try again.", code="DATABASE_UNAVAILABLE")


_DEFAULT_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "RATE_LIMITED",
    500: "INTERNAL_ERROR",
    503: "SERVICE_UNAVAILABLE",
}
_TITLES = {
    400: "Bad request",
    401: "Authentication required",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    406: "Not acceptable",
    409: "Conflict",
    413: "Payload too large",
    415: "Unsupported media type",
    429: "Too many requests",
    500: "Internal error",
    503: "Service unavailable",
}


def problem(
    status_code: int, *, code: str | None = None, detail: str = "", title: str | None = None, errors: list | None = None, **extra
) -> dict:
    code = code or _DEFAULT_CODES.get(status_code, "ERROR")
    body = {
        "type": PROBLEM_TYPE_BASE + code.lower().replace("_", "-"),
        "title": title or _TITLES.get(status_code, "Error"),
        "status": status_code,
        "code": code,
        "detail": detail or title or _TITLES.get(status_code, "Error"),
    }
    if errors:
        body["errors"] = errors
    request_id = current_request_id()
    if request_id:
        body["requestId"] = request_id
    for member, value in extra.items():
        body.setdefault(member, value)
    return body


def problem_response(status_code: int, **kwargs) -> JsonResponse:
    return JsonResponse(problem(status_code, **kwargs), status=status_code, content_type=PROBLEM_CONTENT_TYPE)


def _flatten_validation(detail, prefix: str = "") -> list[dict]:
    """DRF's nested ValidationError detail as a flat list of {field, code, message}."""
    if isinstance(detail, dict):
        items = []
        for key, value in detail.items():
            if isinstance(key, int):  # a ListSerializer's errors, {index: errors}: index 0 is a field too
                items += _flatten_validation(value, f"{prefix}.{key}" if prefix else str(key))
                continue
            field = key if key != "non_field_errors" else ""
            items += _flatten_validation(value, f"{prefix}.{field}" if prefix and field else (field or prefix))
        return items
    if isinstance(detail, list):
        items = []
        for index, value in enumerate(detail):
            if isinstance(value, dict | list) and not isinstance(value, exceptions.ErrorDetail):
                items += _flatten_validation(value, f"{prefix}[{index}]")
            else:
                items += _flatten_validation(value, prefix)
        return items
    return [{"field": prefix or None, "code": getattr(detail, "code", "invalid"), "message": str(detail)}]


def exception_handler(exc, context):
    """DRF's exception handler: every API error leaves as a problem document."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        exc = ApiError("The request body is larger than this endpoint accepts.", code="PAYLOAD_TOO_LARGE", status_code=413)
    elif isinstance(exc, OperationalError | InterfaceError):
        exc = database_unavailable(exc)
    if not isinstance(exc, exceptions.APIException):
        return None

    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))

    status_code = exc.status_code
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten_validation(exc.detail)
        fields = sorted({e["field"] for e in errors if e["field"]})
        detail = f"Invalid input: {', '.join(fields)}." if fields else (errors[0]["message"] if errors else "Invalid input.")
        body = problem(status_code, code="VALIDATION_ERROR", title="Validation error", detail=detail, errors=errors)
    elif isinstance(exc, ApiError):
        body = problem(status_code, code=exc.code, detail=str(exc.detail), **exc.extra)
    elif isinstance(exc, exceptions.ParseError):
        body = problem(status_code, code="MALFORMED_BODY", detail=str(exc.detail))
    else:
        code = _DEFAULT_CODES.get(status_code) or str(getattr(exc, "default_code", "error")).upper()
        body = problem(status_code, code=code, detail=str(exc.detail))
    return Response(body, status=status_code, headers=headers, content_type=PROBLEM_CONTENT_TYPE)


def not_found_view(request, exception=None):
    return problem_response(404, detail=f"No route for {request.path}.")


def server_error_view(request):
    return problem_response(500, detail="The server failed to handle the request; it has been logged.")


def bad_request_view(request, exception=None):
    return problem_response(400, detail="The request is malformed.")


def permission_denied_view(request, exception=None):
    return problem_response(403, detail="You may not do this.")
