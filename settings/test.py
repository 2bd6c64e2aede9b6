"""Settings for the test suite: the real components, APP_ENV=test (see settings/env.py)."""

from settings import *  # noqa: F403
from settings.env import env

# The kernel's test-only app (tests/kernel/sample): a small model on the first active service's
# alias, so kernel tests exercise a service schema without depending on any service's models.
INSTALLED_APPS = [*INSTALLED_APPS, "tests.kernel.sample"]
DATABASE_APP_ALIASES = {"kernel_sample": ACTIVE_SERVICES[0]}
INSTALLED_APPS = [*INSTALLED_APPS, "tests.kernel.events.testapp"]  # the events tests' app (tests/kernel/events/testapp)
MESSAGING_VALIDATE_CONTRACTS = True  # every event a test emits is checked against its contract (messaging/contracts.py)

# The suite's fixed credentials, the only fixed ones anywhere: development makes random ones in
# var/dev/ (settings.development) and every other APP_ENV must be given real ones.
SECRET_KEY = "test-only-secret-key-0123456789abcdef0123456789abcdef"
APP_ENV_APPLICATION_SECRET = "test-only-application-secret"
SERVICE_BASIC_AUTH_ACCOUNTS = {account: f"test-only-{account}-service-password" for account in SERVICE_ACCOUNT_PERMISSIONS}
# The suite's operator account (tests/support/auth.py `service_headers`): the other services' tests
# call their routes with it. It exists only here; tests/kernel/test_service_accounts.py checks the
# real accounts.
SERVICE_BASIC_AUTH_USER = "platform"
SERVICE_BASIC_AUTH_ACCOUNTS[SERVICE_BASIC_AUTH_USER] = "test-only-service-password"
SERVICE_ACCOUNT_PERMISSIONS = {**SERVICE_ACCOUNT_PERMISSIONS, SERVICE_BASIC_AUTH_USER: ("*",)}
SERVICE_BASIC_AUTH_CREDENTIALS = dict(SERVICE_BASIC_AUTH_ACCOUNTS)

# Django's PostgreSQL backend with a flush that skips empty tables (tests/support/postgresql): a
# transactional test's teardown flushes every alias.
for _database in DATABASES.values():
    _database["ENGINE"] = "tests.support.postgresql"

# A consumer joins a group in about half its session timeout on Tansu (3 s with the platform's 6 s):
# the suite starts a few hundred consumers. The heartbeat (1 s) stays a third of it.
KAFKA_CONSUMER_SESSION_TIMEOUT_MS = env.int("KAFKA_CONSUMER_SESSION_TIMEOUT_MS", default=3000)
