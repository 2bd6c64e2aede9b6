"""Bare applications, the limits the platform's figures are read against (served only by the bench).

`wsgi_app`: the smallest WSGI reply. `asgi_app`: the smallest ASGI reply, and a WebSocket echo.
"""

from __future__ import annotations

BODY = b'{"status":"ok"}'
HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def wsgi_app(environ, start_response):
    start_response("200 OK", HEADERS)
    return [BODY]


async def asgi_app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(k.lower().encode(), v.encode()) for k, v in HEADERS]})
        await send({"type": "http.response.body", "body": BODY})
    elif scope["type"] == "websocket":
        await _websocket_echo(receive, send)
    elif scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


async def _websocket_echo(receive, send):
    while True:
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif message["type"] == "websocket.receive":
            reply = {"type": "websocket.send"}
            if message.get("text") is not None:
                reply["text"] = message["text"]
            else:
                reply["bytes"] = message.get("bytes") or b""
            await send(reply)
        else:  # websocket.disconnect
            return
