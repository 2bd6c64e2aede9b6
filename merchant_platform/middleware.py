"""Request context, body-size limit and the JSON error safety net."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware

from merchant_platform.context import REQUEST_ID_HEADER, accept_request_id, bind_request_id, reset_request_id
from merchant_platform.errors import problem_response
from merchant_platform.logging import get_logger, request_logger

REQUEST_LOGGER = "merchant_platform.request"
log = get_logger(REQUEST_LOGGER)


class RequestContextMiddleware:
    """Bind requestId (from X-Request-Id or new), echo it, and log one line per request."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.log = request_logger(REQUEST_LOGGER)

    def __call__(self, request):
        request_id = accept_request_id(request.headers.get(REQUEST_ID_HEADER))
        request.request_id = request_id
        token = bind_request_id(request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request_id
            self.log.info(
                "request",
                method=request.method,
                path=request.path,
                status=response.status_code,
                durationMs=round((time.perf_counter() - started) * 1000, 2),
            )
            return response
        finally:
            reset_request_id(token)


class BodySizeLimitMiddleware:
    """Refuse an oversized body before anything reads it (413), and a bogus Content-Length (400)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return problem_response(400, code="BAD_CONTENT_LENGTH", detail="Content-Length is not a number.")
        if length < 0:
            return problem_response(400, code="BAD_CONTENT_LENGTH", detail="Content-Length is negative.")
        limit = settings.MAX_REQUEST_BODY_BYTES
        if length > limit and not request.path.startswith("/admin/"):
            return problem_response(413, detail=f"The request body is {length} bytes; the limit is {limit} bytes.")
        return self.get_response(request)


class AdminOnlyMiddleware:
    """The middleware only the Django admin needs (sessions, CSRF, auth, messages, clickjacking),
    run for /admin/ paths only: the APIs authenticate per request and have no use for cookies, and
    the chain cost about 60 µs per API request (docs/performance.md).

    Django calls process_view only on the middleware listed in MIDDLEWARE, and CSRF protection
    lives there: this class exposes process_view and hands admin requests to its CSRF instance.
    The admin's system checks (admin.E408-E410) look for these classes in MIDDLEWARE, hence
    SILENCED_SYSTEM_CHECKS in settings/base.py.
    """

    PATH_PREFIX = "/admin/"

    def __init__(self, get_response):
        self.get_response = get_response
        # Outermost first, in the order Django documents: sessions, CSRF, auth, messages, clickjacking.
        self.csrf = CsrfViewMiddleware(AuthenticationMiddleware(MessageMiddleware(XFrameOptionsMiddleware(get_response))))
        self.admin_chain = SessionMiddleware(self.csrf)

    def __call__(self, request):
        if request.path_info.startswith(self.PATH_PREFIX):
            return self.admin_chain(request)
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith(self.PATH_PREFIX):
            return self.csrf.process_view(request, view_func, view_args, view_kwargs)
        return None


class ProblemMiddleware:
    """Turn an unhandled exception, and any HTML error page outside the admin, into a problem."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if response.status_code >= 400 and content_type.startswith("text/html") and not request.path.startswith("/admin/"):
            return problem_response(response.status_code, detail=f"{request.method} {request.path} failed.")
        return response

    def process_exception(self, request, exception):
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return problem_response(413, detail=f"The request body is larger than the limit of {limit} bytes.")
        if isinstance(exception, Http404 | PermissionDenied | BadRequest | SuspiciousOperation):
            return None  # Django answers through handler400/403/404, which speak problem details too
        log.exception("request.unhandled_exception", method=request.method, path=request.path)
        return problem_response(500, detail="The server failed to handle the request; it has been logged.")
