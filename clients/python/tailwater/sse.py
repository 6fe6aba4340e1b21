"""A Server-Sent Events parser that follows the event-stream format of the HTML standard,
fed bytes as they arrive.

The standard library has none, and the details matter for resuming exactly (docs/API.md,
"Streaming"): lines end with CR, LF or CRLF (a CRLF may be split across two reads), ``data``
lines are joined with LF, one space after the colon is dropped, comments (``: heartbeat``) are
skipped, an ``id`` holding NUL is ignored, the last event id persists from event to event, and
an event the stream ends inside of is never dispatched.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import List, Optional

_LINE_END = re.compile(r"\r\n|\r|\n")
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its type (``message`` when unnamed), its data (lines joined with
    LF) and the stream's last event id at that point (empty if none was ever set)."""

    event: str
    data: str
    id: str


class SSEParser:
    """Turns the bytes of an ``text/event-stream`` body into :class:`ServerSentEvent` objects.

    ``feed()`` takes any slice of the body (a character may be split across slices) and returns
    the events it completed. ``last_event_id`` and ``retry`` (milliseconds, from ``retry:``)
    hold what the stream set; ``comments`` counts comment lines (heartbeats).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._after_cr = False
        self._started = False
        self._data: List[str] = []
        self._event = ""
        self._id_buffer = ""
        self.last_event_id = ""
        self.retry: Optional[int] = None
        self.comments = 0

    def feed(self, chunk: bytes) -> List[ServerSentEvent]:
        """Parses the next bytes of the body."""
        return self.feed_text(self._decoder.decode(chunk))

    def feed_text(self, text: str) -> List[ServerSentEvent]:
        """Parses the next characters of the body (already decoded)."""
        if not self._started and text:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._after_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF whose CR ended the previous slice
        if not text:
            return []
        self._after_cr = text.endswith("\r")
        events: List[ServerSentEvent] = []
        start = 0
        for match in _LINE_END.finditer(text):
            line = self._partial + text[start : match.start()]
            self._partial = ""
            self._line(line, events)
            start = match.end()
        self._partial += text[start:]
        return events

    def _line(self, line: str, events: List[ServerSentEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            self.comments += 1
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._id_buffer = value
        elif name == "retry":
            if _DIGITS.fullmatch(value):
                self.retry = int(value)
        # any other field is ignored, as the standard says

    def _dispatch(self, events: List[ServerSentEvent]) -> None:
        self.last_event_id = self._id_buffer
        if not self._data:
            self._event = ""
            return
        data = "\n".join(self._data)
        events.append(ServerSentEvent(self._event or "message", data, self.last_event_id))
        self._data = []
        self._event = ""


__all__ = ["SSEParser", "ServerSentEvent"]
