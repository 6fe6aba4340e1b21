"""Following a stream (a run, a topic or the runs feed) as a generator, resuming by cursor.

The server numbers every entry and sends ``id: <seq>-<epoch>`` with it (and ``cursor`` frames
for entries a filter skipped); sending the last one back as ``Last-Event-ID`` resumes right
after it, so across a cut nothing is lost and nothing repeats (docs/API.md, "Streaming").
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional, Sequence, Union
from urllib.parse import urlencode

from ._backoff import Backoff
from ._http import Transport, describe, run_path, topic_path
from ._names import check_topic
from .errors import ConnectionFailed, TailwaterError
from .sse import SSEParser

#: ``end`` reasons after which the API says to reconnect with the cursor rather than stop.
RESUMABLE_END_REASONS = frozenset({"shutdown", "maxDuration", "maxBytes"})

_STREAM_CURSOR = re.compile(r"\d{1,15}(?:-[0-9a-f]{8})?")


@dataclass(frozen=True)
class TailEvent:
    """What :func:`tail` yields; ``type`` says which fields are set.

    - ``open``: the server accepted a connection (the first, or one after a reconnect).
    - ``entry``: the next entry (``entry``, a dict), ``json`` its text exactly as sent, and
      ``cursor``, the place after it: save it and pass it back as ``after`` to resume.
    - ``gap``: ``gap`` is ``{"reason": "reset"}`` (the cursor was not this store's; the stream
      follows from its start) or ``{"reason": "retention", "fromSeq", "toSeq"}``.
    - ``reconnecting``: the connection was cut; it reconnects after ``delay`` seconds
      (``attempt``, ``reason``).
    - ``end``: the last event, ``end`` = ``{"reason", "status"?, "lastSeq"}``.
    """

    type: str
    entry: Optional[Dict[str, Any]] = None
    json: Optional[str] = None
    cursor: Optional[str] = None
    gap: Optional[Dict[str, Any]] = None
    end: Optional[Dict[str, Any]] = None
    attempt: int = 0
    delay: float = 0.0
    reason: str = ""


def tail(
    pipeline: Optional[str] = None,
    run: Optional[str] = None,
    *,
    topic: Optional[str] = None,
    runs_feed: bool = False,
    after: Union[int, str, None] = None,
    from_latest: bool = False,
    last: Optional[int] = None,
    kinds: Optional[Sequence[str]] = None,
    steps: Optional[Sequence[str]] = None,
    correlation_ids: Optional[Sequence[str]] = None,
    log_after: Optional[str] = None,
    server: Optional[str] = None,
    token: Optional[str] = None,
    read_timeout: float = 60.0,
    max_retries: int = 5,
    backoff: Backoff = Backoff(),
) -> Iterator[TailEvent]:
    """Follows a run (``pipeline``, ``run``; ``run`` may be ``latest``), a ``topic``, or the
    runs feed (``runs_feed=True``), yielding :class:`TailEvent` objects until an ``end``.

    Where to start: ``after`` a saved cursor (or a bare seq); else ``last`` N entries; else
    ``from_latest`` (only what is written from now on); else the first entry. ``kinds``,
    ``steps`` and ``correlation_ids`` filter (any value within one, all given ones).
    ``log_after`` (a run only) is the ``cursor`` of :meth:`Client.last_log_lines`: log entries
    up to it are left out, since their text was read already; every other entry comes as usual.

    When the connection is cut, or a connection brings nothing (not even a heartbeat, sent
    every 25 s) for ``read_timeout`` seconds, it reconnects with ``Last-Event-ID`` after a
    capped exponential ``backoff`` (or a 503's ``Retry-After``), and raises
    :class:`~tailwater.errors.ConnectionFailed` after ``max_retries`` consecutive failed
    connections (one that delivered something resets the count). An ``end`` that only asks the
    viewer to come back (``shutdown``, ``maxDuration``, ``maxBytes``) is followed the same way.
    A refusal retrying cannot change (400, 401, 403, 404) raises at once. Leaving the loop
    (``break``) closes the connection.
    """
    if runs_feed:
        path = "/api/v1/runs/stream"
    elif topic is not None:
        path = f"{topic_path(check_topic(topic))}/stream"
    elif pipeline is not None and run is not None:
        path = f"{run_path(pipeline, run)}/stream"
    else:
        raise ValueError("tail() needs pipeline and run, or topic, or runs_feed=True.")
    transport = Transport(server, token, read_timeout)
    query: Dict[str, str] = {}
    for name, values in (("kinds", kinds), ("steps", steps), ("correlationIds", correlation_ids)):
        if values:
            query[name] = ",".join(values)
    if log_after is not None and (runs_feed or topic is not None):
        raise ValueError("log_after is for a run's stream (pipeline and run).")
    cursor = None if after is None else str(after)
    failures = 0

    while True:
        headers = {"Accept": "text/event-stream"}
        start = dict(query)
        if log_after is not None:
            start["logAfter"] = log_after
        if cursor is not None:
            headers["Last-Event-ID"] = cursor
        elif last is not None:
            start["tail"] = str(last)
        elif from_latest:
            start["from"] = "latest"
        url = f"{path}?{urlencode(start)}" if start else path
        progressed = False
        retry_after: Optional[float] = None
        try:
            conn, answer = transport.open_stream(url, headers, read_timeout)
        except TailwaterError as error:
            if not error.retryable:
                raise
            failure = error.message
            retry_after = error.retry_after
        else:
            try:
                yield TailEvent("open")
                parser = SSEParser()
                failure = "the stream was cut"
                closing = False
                while not closing:
                    try:
                        chunk = answer.read1(65536)
                    except socket.timeout:
                        failure = f"nothing arrived for {read_timeout:g} s (it went silent)"
                        break
                    except (OSError, http.client.HTTPException) as error:
                        failure = describe(error)
                        break
                    if not chunk:
                        break
                    for message in parser.feed(chunk):
                        progressed = True
                        if message.id and _STREAM_CURSOR.fullmatch(message.id.strip()):
                            cursor = message.id.strip()
                        kind = message.event
                        if kind == "cursor":
                            continue
                        if kind == "end":
                            end = json.loads(message.data)
                            if end.get("reason") in RESUMABLE_END_REASONS:
                                failure = f"the server ended the stream ({end.get('reason')})"
                                closing = True
                                break
                            yield TailEvent("end", end=end)
                            return
                        if kind == "gap":
                            gap = json.loads(message.data)
                            if gap.get("reason") == "reset":
                                # The stream starts over: the text log_after named is another log's.
                                log_after = None
                            yield TailEvent("gap", gap=gap)
                            continue
                        if kind == "error":
                            detail = json.loads(message.data)
                            failure = str(detail.get("message") or "stream error")
                            closing = True
                            break
                        entry = json.loads(message.data)
                        yield TailEvent(
                            "entry",
                            entry=entry,
                            json=message.data,
                            cursor=cursor if cursor is not None else str(entry.get("seq")),
                        )
            finally:
                conn.close()
        failures = 1 if progressed else failures + 1
        if failures > max_retries:
            raise ConnectionFailed(
                f"Gave up following the stream after {max_retries} failed attempts: {failure}"
            )
        delay = retry_after if retry_after is not None else backoff.delay(failures - 1)
        yield TailEvent("reconnecting", attempt=failures, delay=delay, reason=failure)
        time.sleep(delay)


__all__ = ["RESUMABLE_END_REASONS", "TailEvent", "tail"]
