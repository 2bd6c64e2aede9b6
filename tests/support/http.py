"""Small HTTP servers standing in for another service (commerce for the admin, a log collector...):
a real server on a free loopback port, answering JSON through a handler's `answer(path)`."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """A stand-in server's handler: `answer(path)` says (status, JSON body), by default 404 for
    every path (a subclass answers the paths it stands in for); no access log."""

    def answer(self, path: str) -> tuple[int, object]:
        return 404, {"code": "NOT_FOUND", "detail": f"Nothing stands in for {path}."}

    def do_GET(self):
        status, payload = self.answer(self.path)
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        """Keep the test output quiet: no access log lines."""


@contextlib.contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on a free loopback port, answering with `handler`; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
