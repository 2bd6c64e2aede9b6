"""Entry point of the WSGI server's workers (granian, started by `manage.py serve`).

granian imports this module in each worker process and has no post-fork hook, so the import does
what every worker does once at start: validate the configuration and lease the worker's own
snowflake id (lifecycle.process_start). A refusal (a worker id held elsewhere, say) is one line on
stderr and exit status 1; granian then stops with a non-zero status, and so does `serve`.
`manage.py` and the tests import merchant_platform.wsgi, which leases nothing.
"""

import atexit
from multiprocessing import util

from merchant_platform.wsgi import application

from merchant_platform.lifecycle import process_start  # isort: skip  (after wsgi, which sets Django up)

__all__ = ["application"]

process_start("web")

# granian's workers are multiprocessing processes, which leave through os._exit and so skip atexit:
# run its handlers (lease release, pool close) through multiprocessing's own exit finalizers.
util.Finalize(None, atexit._run_exitfuncs, exitpriority=0)
