"""Entry point of the WSGI server's workers (granian, started by `manage.py serve`).

granian imports this module in each worker process and has no post-fork hook, so the import does
what every worker does once at start: validate the configuration and lease the worker's own
snowflake id (lifecycle.process_start). A refusal (a worker id held elsewhere, say) is one line on
stderr, SIGTERM to granian's main process and exit status 1, and `serve` stops with a non-zero
status: a replacement worker would be refused alike, and granian stops respawning only when a worker
dies within 5.5 s of its start, which a worker importing Django on a loaded machine can outlast.
`manage.py` and the tests import merchant_platform.wsgi, which leases nothing.
"""

import atexit
import os
import signal
from multiprocessing import util

from merchant_platform.wsgi import application

from merchant_platform.lifecycle import process_start  # isort: skip  (after wsgi, which sets Django up)

__all__ = ["application"]

try:
    process_start("web")
except SystemExit:
    os.kill(os.getppid(), signal.SIGTERM)
    raise

# granian's workers are multiprocessing processes, which leave through os._exit and so skip atexit:
# run its handlers (lease release, pool close) through multiprocessing's own exit finalizers.
util.Finalize(None, atexit._run_exitfuncs, exitpriority=0)
