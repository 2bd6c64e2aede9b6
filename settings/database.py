"""One PostgreSQL, one schema per service (docs/architecture.md section 3).

`default` holds Django's own tables and the shared `public` records. Every service gets an alias of
its own, named after it, whose connection sees only the service's schema (search_path=<schema>, so
the service's migrations table lives there too). `<SERVICE>_DATABASE_URL` moves one service to
another server.
"""

from merchant_platform.registry import active_services
from settings.env import IS_TEST, env

DATABASE_URL = env.str("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/merchant_platform")

# psycopg's pool per alias; Django requires CONN_MAX_AGE=0 with it. Tests run without a pool, so a
# closed connection is really closed before the test database is dropped.
DB_POOL = env.bool("DB_POOL", default=not IS_TEST)
DB_POOL_MIN_SIZE = env.int("DB_POOL_MIN_SIZE", default=1)
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=8)
DB_POOL_TIMEOUT = env.float("DB_POOL_TIMEOUT", default=10.0)


def database_settings(url: str, *, search_path: str | None) -> dict:
    config = env.db_url_config(url)
    options = config.setdefault("OPTIONS", {})
    options["connect_timeout"] = env.int("DB_CONNECT_TIMEOUT", default=5)
    if search_path:
        options["options"] = f"-c search_path={search_path}"
    if DB_POOL:
        options["pool"] = {"min_size": DB_POOL_MIN_SIZE, "max_size": DB_POOL_MAX_SIZE, "timeout": DB_POOL_TIMEOUT}
        config["CONN_MAX_AGE"] = 0
    config["TEST"] = {"NAME": f"test_{config['NAME']}"}
    return config


DATABASES = {"default": database_settings(DATABASE_URL, search_path=None)}
for _service in active_services():
    _url = env.str(f"{_service.name.upper()}_DATABASE_URL", default=DATABASE_URL)
    DATABASES[_service.db_alias] = database_settings(_url, search_path=_service.schema)

DATABASE_ROUTERS = ["merchant_platform.db.ServiceRouter"]
# Apps that are not services but should live on a service's alias: app label -> alias (tests only).
DATABASE_APP_ALIASES: dict[str, str] = {}
