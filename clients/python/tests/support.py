"""Shared fixtures of the Python client's tests: a real ``tailwater serve`` process, loopback
TCP proxies that misbehave on purpose, and a bounded wait.

Imported first by every test module: it puts the package's source (clients/python) on
``sys.path``, so the tests exercise the tree as it is, not an installed copy.
"""

from __future__ import annotations

import http.client
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
REPO = PACKAGE_ROOT.parent.parent
#: The server to start: this checkout's, or another build's (``TAILWATER_TEST_BIN``).
BIN = Path(os.environ.get("TAILWATER_TEST_BIN") or REPO / "bin" / "tailwater")

if str(PACKAGE_ROOT) not in sys.path:
    sys.path.insert(0, str(PACKAGE_ROOT))

#: Streams end soon after a run finishes, and readers check the store often, so tests are quick.
SERVER_ENV = {
    "TAILWATER_FINISH_GRACE_SECONDS": "0.3",
    "TAILWATER_POLL_SECONDS": "0.1",
}


def free_port() -> int:
    """A loopback port nothing listens on (it was just released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Polls ``predicate`` until it holds; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def node_binary() -> str:
    node = os.environ.get("TAILWATER_TEST_NODE") or shutil.which("node")
    if not node:
        raise RuntimeError("node is not on PATH (set TAILWATER_TEST_NODE): the tests need a real server")
    return node


class ServerProcess:
    """A real ``tailwater serve`` on a loopback port with its own data directory. ``stop()`` and
    ``start()`` again keep the port and the data: the same server, restarted."""

    def __init__(self, env: Optional[Dict[str, str]] = None) -> None:
        if not (BIN.parent.parent / "dist" / "cli" / "main.js").exists():
            raise RuntimeError(f"{BIN.parent.parent / 'dist'} is missing: run `npm run build` first")
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix="tailwater-py-data-")
        self.env = {**os.environ, **SERVER_ENV, **(env or {})}
        self._log = tempfile.TemporaryFile()
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        self.process = subprocess.Popen(
            [node_binary(), str(BIN), "serve", "--port", str(self.port), "--data", self.data]
            + ["--log-level", "silent"],
            cwd=str(REPO),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while not self._ready():
            failure = None
            if self.process.poll() is not None:
                failure = f"tailwater serve exited ({self.process.returncode}):\n{self.output()}"
            elif time.monotonic() > deadline:
                failure = f"tailwater serve was not ready within {timeout} s:\n{self.output()}"
            if failure is not None:
                self.cleanup()
                raise RuntimeError(failure)
            time.sleep(0.05)
        return self

    def _ready(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a graceful stop), then SIGKILL if it does not exit in time."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    def cleanup(self) -> None:
        self.stop()
        if not self._log.closed:
            self._log.close()
        shutil.rmtree(self.data, ignore_errors=True)


class ModuleServer:
    """The one real server a test module shares. ``setUpModule = server.start`` starts it before
    the module's first test and ``tearDownModule = server.cleanup`` removes it and its data after
    the last; ``names()`` gives each test a pipeline of its own, so tests never see one another's
    runs."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._server: Optional[ServerProcess] = None

    def start(self) -> None:
        self._server = ServerProcess().start()

    def cleanup(self) -> None:
        if self._server is not None:
            self._server.cleanup()

    def _running(self) -> ServerProcess:
        if self._server is None:
            raise RuntimeError("the module's server is not started (setUpModule = server.start)")
        return self._server

    @property
    def url(self) -> str:
        return self._running().url

    @property
    def port(self) -> int:
        return self._running().port

    def names(self) -> Tuple[str, str]:
        return f"{self.prefix}.{uuid.uuid4().hex[:8]}", "r1"


def canned_server(test: unittest.TestCase, status: int, body: bytes) -> Tuple[str, List[Dict[str, str]]]:
    """A loopback HTTP server that answers every request with ``status`` and the JSON ``body``,
    and records each request's method, path and Authorization header; it stops when ``test``
    ends. Returns its URL and the records."""
    seen: List[Dict[str, str]] = []

    class Canned(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization", ""),
                }
            )
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = _answer  # noqa: N815 - the stdlib's names

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    test.addCleanup(server.server_close)
    test.addCleanup(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}", seen


class _Proxy:
    """A loopback TCP proxy to ``upstream_port``; subclasses decide what reaches the client."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self.connections = 0
        self._lock = threading.Lock()
        self._sockets: List[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                number = self.connections
                self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client, number), daemon=True).start()

    def _upstream(self) -> socket.socket:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=30)
        with self._lock:
            self._sockets.append(upstream)
        return upstream

    def _serve(self, client: socket.socket, number: int) -> None:
        raise NotImplementedError

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        """Copies bytes until either side closes."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        finally:
            _shut(target)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                _shut(sock)
                sock.close()
            self._sockets.clear()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class AnswerCuttingProxy(_Proxy):
    """Forwards every request whole, but for the answers ``cut(n)`` picks (n = 1, 2, … across
    all connections) it closes the client's connection as soon as the answer's head arrives from
    the server — after the server has stored the request (it answers only once the data is
    durable, docs/API.md) and before a byte of the answer reaches the client."""

    def __init__(self, upstream_port: int, cut: Callable[[int], bool]) -> None:
        self.cut = cut
        self.answers = 0
        self.cuts = 0
        super().__init__(upstream_port)

    def _serve(self, client: socket.socket, number: int) -> None:
        upstream = self._upstream()
        threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = upstream.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = _content_length(head)
                with self._lock:
                    self.answers += 1
                    cutting = self.cut(self.answers)
                    if cutting:
                        self.cuts += 1
                if cutting:
                    return
                if length is None:  # not an answer of known length: pass the rest through
                    client.sendall(head + b"\r\n\r\n" + rest)
                    self._pipe(upstream, client)
                    return
                while len(rest) < length:
                    data = upstream.recv(65536)
                    if not data:
                        return
                    rest += data
                client.sendall(head + b"\r\n\r\n" + rest[:length])
                buffer = rest[length:]
        except OSError:
            pass
        finally:
            _shut(client)
            _shut(upstream)


def _content_length(head: bytes) -> Optional[int]:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return None


class StreamCuttingProxy(_Proxy):
    """Forwards both ways, but cuts each of the first ``cuts`` connections once ``after_bytes``
    of the server's answer have been passed on (mid-stream, possibly mid-frame)."""

    def __init__(self, upstream_port: int, cuts: int, after_bytes: int) -> None:
        self.max_cuts = cuts
        self.after_bytes = after_bytes
        self.cuts = 0
        super().__init__(upstream_port)

    def _serve(self, client: socket.socket, number: int) -> None:
        upstream = self._upstream()
        threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
        cutting = number <= self.max_cuts
        passed = 0
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if cutting and passed + len(data) >= self.after_bytes:
                    client.sendall(data[: self.after_bytes - passed])
                    with self._lock:
                        self.cuts += 1
                    break
                client.sendall(data)
                passed += len(data)
        except OSError:
            pass
        finally:
            _shut(client)
            _shut(upstream)


class GateProxy(_Proxy):
    """Takes connections and reads what clients send, but connects them to the server only once
    ``open()`` is called: until then every request hangs, unanswered."""

    def __init__(self, upstream_port: int) -> None:
        self.gate = threading.Event()
        self.requests_started = threading.Event()
        super().__init__(upstream_port)

    def open(self) -> None:
        self.gate.set()

    def _serve(self, client: socket.socket, number: int) -> None:
        held = b""
        client.settimeout(0.05)
        try:
            while not self.gate.is_set() and not self._closed.is_set():
                try:
                    data = client.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    return
                held += data
                self.requests_started.set()
            if self._closed.is_set():
                return
            client.settimeout(None)
            upstream = self._upstream()
            upstream.sendall(held)
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            self._pipe(upstream, client)
        except OSError:
            pass
        finally:
            _shut(client)


def log_text(client, pipeline: str, run: str) -> str:  # type: ignore[no-untyped-def]
    """The run's whole log, from its entries (every page)."""
    return "".join(entry["text"] for entry in client.iter_entries(pipeline, run, kinds=["log"]))
