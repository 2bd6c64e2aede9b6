"""The product's settings with identity's bench-only route added (identity_urls.py)."""

from settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.identity_urls"
