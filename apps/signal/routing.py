"""WebSocket routes of signal, collected by merchant_platform/routing.py (the ASGI server)."""

from django.urls import path

from apps.signal.stream import StreamConsumer

websocket_urlpatterns = [path("stream", StreamConsumer.as_asgi())]
