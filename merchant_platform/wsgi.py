"""WSGI application: the REST routes, see ARCHITECTURE.md section 1. The server (granian) loads it
through merchant_platform.wsgi_server, which also starts each worker process."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

application = get_wsgi_application()
