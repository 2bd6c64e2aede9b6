"""ASGI entry point: serves the WebSocket routes (Channels); REST goes through WSGI. Its lifespan
releases the process's snowflake lease at shutdown (merchant_platform.lifecycle.lifespan)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402  (after Django is set up)

from merchant_platform.lifecycle import lifespan  # noqa: E402
from merchant_platform.routing import websocket_urlpatterns_with_fallback  # noqa: E402

application = ProtocolTypeRouter(
    {"http": django_asgi_app, "websocket": URLRouter(websocket_urlpatterns_with_fallback()), "lifespan": lifespan}
)
