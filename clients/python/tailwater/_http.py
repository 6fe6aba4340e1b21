"""The one place that speaks HTTP, on ``http.client`` so it can send ``Authorization``, keep a
connection alive between requests and be cut from another thread.

Failures are turned into the classes of :mod:`tailwater.errors`: no answer is a
:class:`~tailwater.errors.ConnectionFailed` (status 0), an error answer carries its status and
Tailwater's code (docs/API.md, "Errors").
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import ssl
import threading
from typing import Any, Collection, Dict, Mapping, Optional, Tuple
from urllib.parse import quote, urlsplit

from .errors import ConnectionFailed, TailwaterError, error_for

DEFAULT_SERVER = "http://127.0.0.1:8585"
USER_AGENT = "tailwater-python/0.1.0"


def resolve_server(server: Optional[str] = None) -> str:
    """The server's base URL: ``server``, else ``TAILWATER_SERVER``, else the default; checked,
    without a trailing slash (as the CLI does, docs/CLI.md)."""
    url = (server or os.environ.get("TAILWATER_SERVER") or DEFAULT_SERVER).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f'server: "{url}" must be an http:// or https:// URL (e.g. {DEFAULT_SERVER}).'
        )
    return url.rstrip("/")


def resolve_token(token: Optional[str] = None) -> Optional[str]:
    """The bearer token: ``token``, else ``TAILWATER_TOKEN``, else none."""
    if token is not None:
        return token or None
    return os.environ.get("TAILWATER_TOKEN") or None


def segment(name: str) -> str:
    """A name percent-encoded as one path segment (``/`` becomes ``%2F``, docs/API.md)."""
    return quote(name, safe="")


def run_path(pipeline: str, run: str) -> str:
    return f"/api/v1/pipelines/{segment(pipeline)}/runs/{segment(run)}"


def topic_path(topic: str) -> str:
    return f"/api/v1/topics/{segment(topic)}"


class Response:
    """A whole answer: status, headers (lower-cased names) and body."""

    def __init__(self, status: int, reason: str, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


def retry_after_of(headers: Mapping[str, str]) -> Optional[float]:
    try:
        value = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value > 0 else None


def error_from(status: int, reason: str, headers: Mapping[str, str], body: bytes) -> TailwaterError:
    """The error an answer stands for, with Tailwater's code and message when it has them."""
    code: Optional[str] = None
    message = f"{status} {reason}".strip()
    try:
        parsed = json.loads(body.decode("utf-8"))
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict):
            if isinstance(error.get("code"), str):
                code = error["code"]
            if isinstance(error.get("message"), str) and error["message"]:
                message = error["message"]
    except (ValueError, UnicodeDecodeError):
        pass  # not a Tailwater error body: keep the status line
    return error_for(status, message, code, retry_after_of(headers))


class Transport:
    """One keep-alive connection to one server, used by one request at a time (a lock)."""

    def __init__(self, server: Optional[str], token: Optional[str], timeout: float) -> None:
        self.server = resolve_server(server)
        self.token = resolve_token(token)
        self.timeout = timeout
        parts = urlsplit(self.server)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        headers = {"User-Agent": USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if extra:
            headers.update(extra)
        return headers

    def connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        """A new connection (not yet open; it opens on the first request)."""
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def url(self, path: str) -> str:
        return f"{self._prefix}{path}"

    def request(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        extra_headers: Optional[Mapping[str, str]] = None,
        also_ok: Collection[int] = (),
    ) -> Response:
        """Sends one request and reads its whole answer. Raises ConnectionFailed when no
        answer arrived, or the error of a non-2xx answer whose status is not in ``also_ok``."""
        headers = self.headers(extra_headers)
        if content_type is not None:
            headers["Content-Type"] = content_type
        with self._lock:
            conn = self._conn
            if conn is None or _stale(conn):
                if conn is not None:
                    conn.close()
                conn = self._conn = self.connect(self.timeout)
            try:
                conn.request(method, self.url(path), body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                status, reason = answer.status, answer.reason
                answer_headers = {name.lower(): value for name, value in answer.getheaders()}
                if answer.will_close:
                    conn.close()
                    self._conn = None
            except (OSError, http.client.HTTPException) as error:
                conn.close()
                self._conn = None
                raise ConnectionFailed(
                    f"No answer from the Tailwater server at {self.server} "
                    f"({method} {path}): {describe(error)}"
                ) from error
        if not 200 <= status < 300 and status not in also_ok:
            raise error_from(status, reason, answer_headers, data)
        return Response(status, reason, answer_headers, data)

    def json_request(self, method: str, path: str, payload: Any = None) -> Any:
        """A request with a JSON body (or none) whose answer is JSON."""
        body = None if payload is None else encode_json(payload)
        answer = self.request(method, path, body, "application/json" if body is not None else None)
        try:
            return answer.json()
        except ValueError as error:
            raise TailwaterError(
                f"{self.server} answered {method} {path} with something other than JSON; "
                "is it a Tailwater server?",
                answer.status,
            ) from error

    def abort(self) -> None:
        """Cuts the request in progress, from another thread: its caller gets ConnectionFailed."""
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def open_stream(
        self, path: str, headers: Mapping[str, str], read_timeout: float
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Opens a stream on a connection of its own, whose reads time out after
        ``read_timeout`` seconds of silence. Raises like :meth:`request` unless 2xx."""
        conn = self.connect(read_timeout)
        try:
            conn.request("GET", self.url(path), headers=self.headers(headers))
            answer = conn.getresponse()
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            raise ConnectionFailed(
                f"Cannot reach the Tailwater server at {self.server}: {describe(error)}"
            ) from error
        if not 200 <= answer.status < 300:
            try:
                data = answer.read()
            except (OSError, http.client.HTTPException):
                data = b""
            conn.close()
            raise error_from(
                answer.status,
                answer.reason,
                {name.lower(): value for name, value in answer.getheaders()},
                data,
            )
        return conn, answer


def encode_json(payload: Any) -> bytes:
    """Compact UTF-8 JSON; NaN and infinities are refused (they are not JSON)."""
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
        "utf-8"
    )


def describe(error: BaseException) -> str:
    if isinstance(error, socket.timeout):
        return "timed out"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _stale(conn: http.client.HTTPConnection) -> bool:
    """An idle keep-alive connection the server has closed is readable (at its end of file):
    replace it rather than lose a request on it."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
