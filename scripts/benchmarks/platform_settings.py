"""The product's settings with the bench-only routes added (platform_urls.py).

BENCH_DROP_MIDDLEWARE (comma-separated dotted paths) removes middleware, for the `stack` target's
what-if measurements only; unset, the middleware is the product's.
"""

import os

from settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.platform_urls"

_dropped = {name.strip() for name in os.environ.get("BENCH_DROP_MIDDLEWARE", "").split(",") if name.strip()}
MIDDLEWARE = [name for name in MIDDLEWARE if name not in _dropped]  # noqa: F405
