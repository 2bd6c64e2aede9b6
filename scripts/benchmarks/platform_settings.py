"""The product's settings with the bench-only routes added (platform_urls.py) and the bench's own
service account: the load generator calls the routes it measures as the account `bench`, allowed
everything, with the password the run makes (BENCH_SERVICE_PASSWORD, framework.Context). No product
settings module declares it.

BENCH_DROP_MIDDLEWARE (comma-separated dotted paths) removes middleware, for the `stack` target's
what-if measurements only; unset, the middleware is the product's.
"""

import os

from settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.platform_urls"

_dropped = {name.strip() for name in os.environ.get("BENCH_DROP_MIDDLEWARE", "").split(",") if name.strip()}
MIDDLEWARE = [name for name in MIDDLEWARE if name not in _dropped]  # noqa: F405

if os.environ.get("BENCH_SERVICE_PASSWORD"):
    SERVICE_ACCOUNT_PERMISSIONS = {**SERVICE_ACCOUNT_PERMISSIONS, "bench": ("*",)}  # noqa: F405
    SERVICE_BASIC_AUTH_ACCOUNTS = {**SERVICE_BASIC_AUTH_ACCOUNTS, "bench": os.environ["BENCH_SERVICE_PASSWORD"]}  # noqa: F405
