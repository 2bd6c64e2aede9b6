"""The platform's middleware: `ApiMiddleware` around every request, `LicenseMiddleware` (the request's
license and each service's license gate), `BrowserMiddleware` for the admin and static files.

An API request runs four layers (`MIDDLEWARE` in settings/base.py): this module's `ApiMiddleware`,
`LicenseMiddleware`, Django's `SecurityMiddleware`, and `BrowserMiddleware`'s path check. `ApiMiddleware` does in one
layer what every request needs: the requestId, the body-size limit, the Host check, routing to the
service's URLs first, problem details for errors, and the request's log line. The middleware only
browsers use (WhiteNoise, sessions, CSRF, auth, messages, clickjacking) runs under `/admin`
and `STATIC_URL` only. What each skipped layer saves is measured in docs/performance.md.
"""

from __future__ import annotations

import time
from functools import cache
from importlib import import_module
from types import ModuleType

from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.handlers.exception import response_for_exception
from django.db import InterfaceError, OperationalError
from django.http import Http404
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.urls.resolvers import URLResolver
from rest_framework.exceptions import AuthenticationFailed
from whitenoise.middleware import WhiteNoiseMiddleware

from merchant_platform import licenses
from merchant_platform.authentication_classes import ServiceBasicAuthentication
from merchant_platform.context import REQUEST_ID_HEADER, accept_request_id, bind_request_id, reset_request_id
from merchant_platform.errors import database_unavailable, problem_response
from merchant_platform.logging import RequestLogger, get_logger
from merchant_platform.metrics import HTTP_RESPONSES
from merchant_platform.registry import active_services

REQUEST_LOGGER = "merchant_platform.request"
ADMIN_PREFIX = "/admin"
log = get_logger(REQUEST_LOGGER)


@cache
def service_first_urlconfs(root_urlconf: str) -> dict[str, ModuleType]:
    """For each service prefix, the root URLconf's routes with that service's first.

    Django tries the root's routes in order, and each service prefix that does not match costs an
    exception, so the last of ten services resolved markedly slower than the first.
    Setting `request.urlconf` to the service's variant (Django's documented per-request URLconf)
    resolves it first; the variant holds every route, so `reverse()` and error handlers behave
    exactly as with the root."""
    root = import_module(root_urlconf)
    prefixes = {service.prefix.lstrip("/") + "/": service.prefix for service in active_services()}
    urlconfs = {}
    for route in root.urlpatterns:
        prefix = prefixes.get(str(route.pattern)) if isinstance(route, URLResolver) else None
        if prefix is None:
            continue
        urlconf = ModuleType(f"{root_urlconf}[{prefix}]")
        urlconf.urlpatterns = [route, *(other for other in root.urlpatterns if other is not route)]
        for status in (400, 403, 404, 500):
            handler = f"handler{status}"
            if hasattr(root, handler):
                setattr(urlconf, handler, getattr(root, handler))
        urlconfs[prefix] = urlconf
    return urlconfs


def service_prefix(path: str) -> str:
    """`/v1/api/outreach` for `/v1/api/outreach/inquiries/submit` (the first three segments)."""
    return "/".join(path.split("/", 4)[:4])


class ApiMiddleware:
    """Every request, outermost: bind requestId (from X-Request-Id or new) and echo it; refuse an
    oversized body (413) or a bogus Content-Length (400) before anything reads it; check Host against
    ALLOWED_HOSTS; route to the service's URLs first; answer every error, HTML error pages and
    unhandled exceptions included, as problem details (except the admin's HTML); log one line."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.request_log = RequestLogger(REQUEST_LOGGER, flush_seconds=settings.LOG_REQUEST_FLUSH_SECONDS)

    def __call__(self, request):
        request_id = accept_request_id(request.META.get("HTTP_X_REQUEST_ID"))
        request.request_id = request_id
        token = bind_request_id(request_id)
        started = time.perf_counter()
        try:
            response = self._respond(request)
            response[REQUEST_ID_HEADER] = request_id
            # The service is the path's third segment (/v1/api/<service>/...); other paths count as "platform".
            segments = request.path.split("/", 4)
            service = segments[3] if len(segments) > 3 and segments[1] == "v1" else "platform"
            HTTP_RESPONSES.labels(service=service, status_class=f"{response.status_code // 100}xx").inc()
            self.request_log.line(
                method=request.method,
                path=request.path,
                status=response.status_code,
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
            )
            return response
        finally:
            reset_request_id(token)

    def _respond(self, request):
        path = request.path_info
        refusal = self._refuse_body(request, path)
        if refusal is not None:
            return refusal
        try:
            request.get_host()  # raises DisallowedHost for a Host outside ALLOWED_HOSTS
        except SuspiciousOperation as exc:
            return response_for_exception(request, exc)
        urlconf = service_first_urlconfs(settings.ROOT_URLCONF).get(service_prefix(path))
        if urlconf is not None:
            request.urlconf = urlconf
        response = self.get_response(request)
        if response.status_code >= 400 and response.get("Content-Type", "").startswith("text/html") and not path.startswith(ADMIN_PREFIX):
            response = problem_response(response.status_code, detail=f"{request.method} {request.path} failed.")
        if not response.streaming and "Content-Length" not in response:
            response["Content-Length"] = str(len(response.content))
        return response

    @staticmethod
    def _refuse_body(request, path: str):
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return problem_response(400, code="BAD_CONTENT_LENGTH", detail="Content-Length is not a number.")
        if length < 0:
            return problem_response(400, code="BAD_CONTENT_LENGTH", detail="Content-Length is negative.")
        limit = settings.MAX_REQUEST_BODY_BYTES
        if length > limit and not path.startswith(ADMIN_PREFIX):
            return problem_response(413, detail=f"The request body is {length} bytes; the limit is {limit} bytes.")
        return None

    def process_exception(self, request, exception):
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return problem_response(413, detail=f"The request body is larger than the limit of {limit} bytes.")
        if isinstance(exception, Http404 | PermissionDenied | BadRequest | SuspiciousOperation):
            return None  # Django answers through handler400/403/404, which speak problem details too
        if isinstance(exception, OperationalError | InterfaceError):
            error = database_unavailable(exception)
            return problem_response(error.status_code, code=error.code, detail=str(error.detail))
        log.exception("request.unhandled_exception", method=request.method, path=request.path)
        return problem_response(500, detail="The server failed to handle the request; it has been logged.")


# The gate's refusals (docs/services/licensing.md, "The license gate"), by what the request presented.
LICENSE_REFUSALS = {
    "missing": ("LICENSE_REQUIRED", "This service needs a license: send its License-Id and License-Key headers."),
    "unknown": ("LICENSE_UNKNOWN", "The license could not be verified (no trusted certificate, or another key)."),
    "not_in_force": ("LICENSE_NOT_IN_FORCE", "The license is not in force (not ACTIVATED, or past its expiry)."),
}
UNGATED_PATHS = ("/healthz", "/readyz")
UNGATED_PREFIXES = ("/doc",)


class LicenseMiddleware:
    """Spec 2.4 and 7: `request.license` is the verified certificate payload of the license the request
    presents (License-Id and License-Key headers), or None when nothing is presented or the
    certificate is missing, expired, tampered with or not the key's; it never raises. None means
    unknown, not unlicensed. Then the service's gate (`<SERVICE>_LICENSE_GATE`) decides: `off` serves
    (the default), `warn` serves and logs a request whose license is not in force, `enforce` refuses it
    (403, LICENSE_REQUIRED / LICENSE_UNKNOWN / LICENSE_NOT_IN_FORCE): unknown is refused, since nothing
    proves the license. Probes, documents and the services' own calls (HTTP Basic) are never gated."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.gates = {
            service.prefix: mode for service in active_services() if (mode := settings.LICENSE_GATES.get(service.name, "off")) != "off"
        }

    def __call__(self, request):
        license_id = request.headers.get(licenses.LICENSE_ID_HEADER)
        request.license = licenses.presented_license(license_id, request.headers.get(licenses.LICENSE_KEY_HEADER)) if license_id else None
        prefix = service_prefix(request.path_info)
        mode = self.gates.get(prefix)
        if mode is None or self._ungated(request, request.path_info[len(prefix) :]):
            return self.get_response(request)
        in_force = licenses.license_in_force(request.license)
        if in_force:
            return self.get_response(request)
        outcome = "missing" if not license_id else "unknown" if in_force is None else "not_in_force"
        log.warning("license.gate", mode=mode, outcome=outcome, licenseId=license_id, path=request.path)
        if mode == "warn":
            return self.get_response(request)
        code, detail = LICENSE_REFUSALS[outcome]
        return problem_response(403, code=code, detail=detail)

    @staticmethod
    def _ungated(request, path: str) -> bool:
        if path in UNGATED_PATHS or path.startswith(UNGATED_PREFIXES):
            return True
        try:
            return ServiceBasicAuthentication().authenticate(request) is not None
        except AuthenticationFailed:
            return False


class BrowserMiddleware:
    """The middleware only browsers need, run under `/admin` and `STATIC_URL` only: WhiteNoise's
    static files, sessions, CSRF, auth, messages and clickjacking. The APIs authenticate per request,
    use no cookies and serve no files. (Django's CommonMiddleware is not needed: APPEND_SLASH is off,
    and ApiMiddleware checks Host and sets Content-Length.)

    Django calls process_view only on the middleware listed in MIDDLEWARE, and CSRF protection
    lives there: this class exposes process_view and hands admin requests to its CSRF instance.
    The admin's system checks (admin.E408-E410) look for the session, auth and messages classes in
    MIDDLEWARE, hence SILENCED_SYSTEM_CHECKS in settings/base.py."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.prefixes = (ADMIN_PREFIX, settings.STATIC_URL)
        # Outermost first, in the order Django documents them.
        self.csrf = CsrfViewMiddleware(AuthenticationMiddleware(MessageMiddleware(XFrameOptionsMiddleware(get_response))))
        self.browser_chain = WhiteNoiseMiddleware(SessionMiddleware(self.csrf))

    def __call__(self, request):
        if request.path_info.startswith(self.prefixes):
            return self.browser_chain(request)
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith(ADMIN_PREFIX):
            return self.csrf.process_view(request, view_func, view_args, view_kwargs)
        return None
