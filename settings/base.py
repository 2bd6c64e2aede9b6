from pathlib import Path

from merchant_platform.registry import active_services, is_all_in_one
from settings.env import APP_ENV, IS_LOCAL, IS_PRODUCTION, env, secret

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = secret("DJANGO_SECRET_KEY")
DEBUG = env.bool("DEBUG", default=False)
# Development answers this machine's names only (the Django test client adds its `testserver`).
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"] if IS_LOCAL else [])
RUN_MODE = env.str("RUN_MODE", default="startup")
ALL_IN_ONE = is_all_in_one()
ACTIVE_SERVICES = tuple(service.name for service in active_services())

# Where a service calls its siblings: the default prefix of COMMERCE_INVENTORY_URL, LEDGER_FINANCE_URL
# and the like. All-in-one: `serve`'s internal listener (INTERNAL_WSGI_PORT), a WSGI server of its own
# for calls between services, so a request holding a thread of the public server never waits for a
# free thread of that same pool (docs/operations.md, "Calls between services"). Split: the gateway.
INTERNAL_WSGI_PORT = env.int("INTERNAL_WSGI_PORT", default=8004)
SERVICE_BASE_URL = env.str(
    "SERVICE_BASE_URL", default=f"http://127.0.0.1:{INTERNAL_WSGI_PORT}" if ALL_IN_ONE else "http://127.0.0.1:8000"
).rstrip("/")

# Django admin is an operator tool of the all-in-one topology (ADMIN_ENABLED turns it on elsewhere).
ADMIN_ENABLED = env.bool("ADMIN_ENABLED", default=ALL_IN_ONE)
# Where the admin reads merchants' names (commerce's API prefix, merchant_platform.admin).
ADMIN_COMMERCE_URL = env.str("ADMIN_COMMERCE_URL", default=f"{SERVICE_BASE_URL}/v1/api/commerce").rstrip("/")
# The admin's cookies (the APIs set none): sent over HTTPS only outside development and test (TLS
# ends at the gateway, SECURE_PROXY_SSL_HEADER), never on cross-site requests; HttpOnly for the
# session and the CSRF token is in settings/security.py.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = not IS_LOCAL
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Strict"

INSTALLED_APPS = [
    "merchant_platform",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    *(f"apps.{name}" for name in ACTIVE_SERVICES),
]

MIDDLEWARE = [
    "merchant_platform.middleware.ApiMiddleware",  # requestId, body limit, Host, problems, the log line
    "merchant_platform.middleware.LicenseMiddleware",  # request.license and each service's license gate
    "django.middleware.security.SecurityMiddleware",
    "merchant_platform.middleware.BrowserMiddleware",  # /admin and /static/ only: WhiteNoise, sessions, CSRF...
]
# BrowserMiddleware runs the admin's session, auth and messages middleware, which these checks look
# for in MIDDLEWARE by class.
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410"]

ROOT_URLCONF = "merchant_platform.urls"
WSGI_APPLICATION = "merchant_platform.wsgi.application"
ASGI_APPLICATION = "merchant_platform.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=str(BASE_DIR / "var" / "static"))
Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start without it
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not IS_PRODUCTION

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
APPEND_SLASH = False

# Largest request body any API accepts; larger ones get 413 (services may lower it per view).
MAX_REQUEST_BODY_BYTES = env.int("MAX_REQUEST_BODY_BYTES", default=1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["merchant_platform.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["merchant_platform.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "merchant_platform.negotiation.ContentNegotiation",
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "merchant_platform.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "merchant_platform.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "COERCE_DECIMAL_TO_STRING": True,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Merchant Platform",
    "VERSION": "v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "merchant_platform.openapi.add_problem_responses",
    ],
}


def with_service_openapi_settings(spectacular: dict, namespace: dict) -> dict:
    """SPECTACULAR_SETTINGS plus the `<SERVICE>_OPENAPI_SETTINGS` of the active services (dict
    values, such as ENUM_NAME_OVERRIDES, are merged key by key)."""
    merged = {key: dict(value) if isinstance(value, dict) else value for key, value in spectacular.items()}
    for name in ACTIVE_SERVICES:
        for key, value in namespace.get(f"{name.upper()}_OPENAPI_SETTINGS", {}).items():
            merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    return merged


APP_ENVIRONMENT = APP_ENV
