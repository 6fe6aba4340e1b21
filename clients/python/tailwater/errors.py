"""Errors raised by the client, one class per kind of failure a caller may want to tell apart.

Every refusal before a stream opens comes with ``{"error": {"code": "TW_…", "message": …}}``
and the HTTP status of its code (docs/API.md, "Errors"); those become the classes below.
"""

from __future__ import annotations

from typing import Optional


class TailwaterError(Exception):
    """A refusal or failure the server reported, or a server that could not be reached.

    ``status`` is the HTTP status, or 0 when no answer arrived (unreachable, connection lost);
    ``code`` is Tailwater's error code (``TW_RUN_NOT_FOUND``, …) when the server gave one;
    ``retry_after`` is the seconds a 429/503 asked to wait.
    """

    def __init__(
        self,
        message: str,
        status: int = 0,
        code: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Worth sending again unchanged: unreachable, rate-limited, busy or failing server-side."""
        return self.status == 0 or self.status == 429 or self.status >= 500

    def __str__(self) -> str:
        where = f"{self.status} {self.code}" if self.code else str(self.status)
        return f"{self.message} ({where})" if self.status else self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(message={self.message!r}, status={self.status!r}, "
            f"code={self.code!r}, retry_after={self.retry_after!r})"
        )


class ConnectionFailed(TailwaterError):
    """No answer: the server could not be reached, or the connection broke before the answer.

    A write that fails this way may or may not have been stored; send it again with the same
    producer ``id`` and the server stores it once (docs/API.md, "Entries").
    """


class BadRequest(TailwaterError):
    """400, 413, 415 and other refusals of what was sent: sending it again will not help."""


class Unauthenticated(TailwaterError):
    """401: no token, or one that does not verify (docs/SECURITY.md)."""


class Forbidden(TailwaterError):
    """403: the token lacks the scope, or the origin is not allowed."""


class NotFound(TailwaterError):
    """404: no such run (``TW_RUN_NOT_FOUND``) or route (``TW_NOT_FOUND``)."""


class Conflict(TailwaterError):
    """409: a terminal run set back, a producer id reused for other content, an ambiguous run."""


class Busy(TailwaterError):
    """429 or 503: too many requests or connections, or the server is stopping; retry later."""


class ServerError(TailwaterError):
    """Any other 5xx: a failure on the server's side (``TW_INTERNAL`` is a bug)."""


def error_for(
    status: int, message: str, code: Optional[str] = None, retry_after: Optional[float] = None
) -> TailwaterError:
    """The subclass that fits an answer's status."""
    cls: type
    if status == 0:
        cls = ConnectionFailed
    elif status == 401:
        cls = Unauthenticated
    elif status == 403:
        cls = Forbidden
    elif status == 404:
        cls = NotFound
    elif status == 409:
        cls = Conflict
    elif status in (429, 503):
        cls = Busy
    elif status >= 500:
        cls = ServerError
    else:
        cls = BadRequest
    return cls(message, status, code, retry_after)
