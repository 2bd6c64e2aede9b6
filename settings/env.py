"""One typed reader of the environment, shared by every settings module.

django-environ parses the values; this module adds the one rule settings need beyond it: a setting
that must never default in production (a secret) stops the process with a one-line message that
names the variable.
"""

from __future__ import annotations

import os
import sys

import environ

env = environ.Env()

# settings.test (the test suite's module) implies APP_ENV=test; the package is imported before it.
_DEFAULT_APP_ENV = "test" if os.environ.get("DJANGO_SETTINGS_MODULE") == "settings.test" else "development"
APP_ENV = env.str("APP_ENV", default=_DEFAULT_APP_ENV).lower()
IS_PRODUCTION = APP_ENV == "production"
IS_TEST = APP_ENV == "test"


class MissingSetting(SystemExit):
    """Raised (as a SystemExit, so no traceback) when a production setting is missing."""


def refuse_to_start(message: str) -> None:
    sys.stderr.write(f"merchant-platform: {message}\n")
    raise MissingSetting(1)


def secret(name: str, *, dev_default: str) -> str:
    """A secret: read from the environment; in production it has no default."""
    value = env.str(name, default="")
    if value:
        return value
    if IS_PRODUCTION:
        refuse_to_start(f"{name} must be set in production (APP_ENV=production); refusing to start")
    return dev_default
