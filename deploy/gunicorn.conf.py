"""gunicorn settings of the WSGI server (REST), started by `manage.py serve`.

`serve` passes --bind; the rest comes from the environment (docs/configuration.md). Sync workers
by default: the gateway buffers slow clients, and each worker keeps psycopg pools per alias. With
WEB_THREADS > 1 the workers are threaded (gthread), which `serve` uses when one configured snowflake
worker id must cover the whole WSGI server (one process).
"""

import multiprocessing
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

wsgi_app = "merchant_platform.wsgi:application"
workers = int(os.environ.get("WEB_CONCURRENCY") or multiprocessing.cpu_count() * 2 + 1)
threads = int(os.environ.get("WEB_THREADS") or 1)
worker_class = "gthread" if threads > 1 else "sync"
timeout = int(os.environ.get("WEB_TIMEOUT") or 30)
graceful_timeout = 10
keepalive = 75  # longer than the gateway's upstream keepalive, so nginx closes idle connections first
accesslog = None  # the request middleware logs every request, with its requestId
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
# One shared default path ($HOME/.gunicorn/gunicorn.ctl) would clash between servers on one machine.
control_socket_disable = True

# gunicorn's exit status for "worker failed to boot": the arbiter halts instead of respawning.
WORKER_BOOT_ERROR = 3


def post_fork(server, worker):
    """Each worker process validates the configuration and leases its own snowflake worker id."""
    import django

    django.setup()
    from merchant_platform.lifecycle import process_start

    try:
        process_start("web")
    except SystemExit:
        sys.exit(WORKER_BOOT_ERROR)


def worker_exit(server, worker):
    """Run the exit handlers (lease release, pool close, log flush), then leave without the
    interpreter's teardown: in a forked worker it touches every inherited object and took 4 s here,
    which made every stop wait for gunicorn's graceful timeout. A worker that failed to boot exits
    the normal way, so the arbiter still sees its status."""
    if not worker.booted:
        return
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
