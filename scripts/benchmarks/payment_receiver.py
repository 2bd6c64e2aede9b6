"""The webhook subscriber of the `payment` target: reads each delivery's body and answers 204, as a
receiver that queues the event for later would. Served only by the bench (`payment_receiver:application`)."""

from __future__ import annotations


def application(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    start_response("204 No Content", [("Content-Length", "0")])
    return [b""]
