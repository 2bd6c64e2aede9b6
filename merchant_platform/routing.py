"""WebSocket routes of the active services: each service may declare `websocket_urlpatterns` in its
`routing.py` (signal's /stream)."""

from importlib import import_module
from importlib.util import find_spec

from merchant_platform.registry import active_services

websocket_urlpatterns: list = []
for _service in active_services():
    if find_spec(f"{_service.module}.routing"):
        websocket_urlpatterns += import_module(f"{_service.module}.routing").websocket_urlpatterns
