"""WebSocket routes of the active services: each service may declare `websocket_urlpatterns` in its
`routing.py` (signal's /stream)."""

from importlib import import_module
from importlib.util import find_spec

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path

from merchant_platform.logging import get_logger
from merchant_platform.registry import active_services

log = get_logger(__name__)

websocket_urlpatterns: list = []
for _service in active_services():
    if find_spec(f"{_service.module}.routing"):
        websocket_urlpatterns += import_module(f"{_service.module}.routing").websocket_urlpatterns


class NoRouteConsumer(AsyncWebsocketConsumer):
    """A handshake on a path no service serves: refused (the server answers HTTP 403) with one log
    line, instead of Channels' "No route found" exception, a 500 and a traceback per attempt."""

    async def connect(self):
        log.info("websocket.no_route", path=self.scope.get("path", ""))
        await self.close()


def websocket_urlpatterns_with_fallback() -> list:
    return [*websocket_urlpatterns, re_path(r"", NoRouteConsumer.as_asgi())]
