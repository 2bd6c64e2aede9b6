"""The test settings with another APP_ENV_APPLICATION_SECRET, for the process of
test_wrong_secret.py that must not open what the suite's secret sealed (settings.test fixes it)."""

from settings.test import *  # noqa: F403

APP_ENV_APPLICATION_SECRET = "another-deployment-secret-0123456789abcdef"
