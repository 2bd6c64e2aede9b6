"""Settings for the test suite: the real components, APP_ENV=test (see settings/env.py)."""

from settings import *  # noqa: F403
