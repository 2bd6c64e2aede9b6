"""A test-only ASGI application: one WebSocket route whose consumer joins a room's group (the way
signal's /stream will), served by the fan-out test's two server processes."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings.test")

from django.core.asgi import get_asgi_application

django_application = get_asgi_application()

from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from merchant_platform.realtime import abroadcast, group_name  # noqa: E402


class RoomConsumer(AsyncJsonWebsocketConsumer):
    """Joins the room of its path; forwards room events to the client; a client frame
    {"event", "payload"} is broadcast to the room from this server."""

    async def connect(self):
        self.room = self.scope["url_route"]["kwargs"]["room"]
        await self.channel_layer.group_add(group_name(self.room), self.channel_name)
        await self.accept()
        await self.send_json({"joined": self.room, "server": os.getpid()})

    async def disconnect(self, code):
        await self.channel_layer.group_discard(group_name(self.room), self.channel_name)

    async def receive_json(self, content, **kwargs):
        await abroadcast(self.room, content["event"], content["payload"])

    async def room_event(self, message):
        await self.send_json({"event": message["event"], "payload": message["payload"], "server": os.getpid()})


application = ProtocolTypeRouter(
    {"http": django_application, "websocket": URLRouter([path("test-room/<str:room>", RoomConsumer.as_asgi())])}
)
