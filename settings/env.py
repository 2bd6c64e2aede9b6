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
# Only these two make their own secrets (settings.development); any other APP_ENV needs real ones.
IS_LOCAL = APP_ENV in ("development", "test")


class MissingSetting(SystemExit):
    """Raised (as a SystemExit, so no traceback) when a production setting is missing."""


def refuse_to_start(message: str) -> None:
    sys.stderr.write(f"merchant-platform: {message}\n")
    raise MissingSetting(1)


def secret(name: str, *, local_default: str | None = None) -> str:
    """A secret, read from the environment. Without it, development and test use `local_default`
    (a credential of the local components, such as the S3 server's) or else a random value made once
    in var/dev/ (settings.development); every other APP_ENV refuses to start, naming the variable."""
    value = env.str(name, default="")
    if value:
        return value
    if not IS_LOCAL:
        refuse_to_start(f"{name} must be set when APP_ENV={APP_ENV} (only development and test make their own); refusing to start")
    if local_default is not None:
        return local_default
    from settings.development import development_secret

    return development_secret(name)
