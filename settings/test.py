"""Settings for the test suite: the real components, APP_ENV=test (see settings/env.py)."""

from settings import *  # noqa: F403

# The kernel's test-only app (tests/kernel/sample): a small model on the first active service's
# alias, so kernel tests exercise a service schema without depending on any service's models.
INSTALLED_APPS = [*INSTALLED_APPS, "tests.kernel.sample"]
DATABASE_APP_ALIASES = {"kernel_sample": ACTIVE_SERVICES[0]}
INSTALLED_APPS = [*INSTALLED_APPS, "tests.events.testapp"]  # the events tests' app (tests/events/testapp)
