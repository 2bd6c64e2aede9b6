"""WSGI application: the REST routes, see docs/architecture.md section 1. The server (granian) loads it
through merchant_platform.wsgi_server, which also starts each worker process."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

application = get_wsgi_application()

# What the import built (modules, classes, settings, URL patterns) lives as long as the process: keep
# it out of the collector's full passes, which otherwise walk all of it again (docs/performance.md).
# Objects made while serving are collected as usual.
gc.collect()
gc.freeze()
