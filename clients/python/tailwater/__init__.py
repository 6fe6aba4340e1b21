"""Tailwater's Python client, standard library only (docs/PYTHON.md).

- :class:`Client`: typed calls over the HTTP API (docs/API.md).
- :class:`Publisher`: non-blocking, batched, retried publishing of log text and events.
- :class:`TailwaterHandler`: a ``logging`` handler that ships records to a run.
- :func:`tail`: follows a stream as a generator, resuming by cursor.

The server is ``server=`` or ``TAILWATER_SERVER`` (default ``http://127.0.0.1:8585``), the
token ``token=`` or ``TAILWATER_TOKEN``.
"""

from ._backoff import Backoff
from .client import Client
from .errors import (
    BadRequest,
    Busy,
    Conflict,
    ConnectionFailed,
    Forbidden,
    NotFound,
    ServerError,
    TailwaterError,
    Unauthenticated,
)
from .logging_handler import TailwaterHandler
from .publisher import Publisher
from .sse import SSEParser, ServerSentEvent
from .tail import TailEvent, tail

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "BadRequest",
    "Busy",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "NotFound",
    "Publisher",
    "SSEParser",
    "ServerError",
    "ServerSentEvent",
    "TailEvent",
    "TailwaterError",
    "TailwaterHandler",
    "Unauthenticated",
    "__version__",
    "tail",
]
