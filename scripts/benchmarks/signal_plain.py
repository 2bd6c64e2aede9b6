"""The bench's unencrypted twin of signal's /stream: the same consumer (handshake, token, rooms,
history, presence) with the per-message AES-GCM taken out, so `scripts/bench signal` can show what
encryption costs. Never part of the product."""

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

from django.core.asgi import get_asgi_application

django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from apps.signal.stream import StreamConsumer  # noqa: E402


class PlainStreamConsumer(StreamConsumer):
    async def send_secure(self, message: dict) -> None:
        if self.channel is not None and not self.closing:
            await self.send(text_data=json.dumps(message, separators=(",", ":")))

    async def receive(self, text_data=None, bytes_data=None):
        if self.channel is None or text_data is None:
            await super().receive(text_data, bytes_data)
        else:
            await self.handle(json.loads(text_data))


application = ProtocolTypeRouter({"http": django_application, "websocket": URLRouter([path("stream", PlainStreamConsumer.as_asgi())])})
