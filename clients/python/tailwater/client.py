"""Typed calls over Tailwater's native HTTP API (docs/API.md).

Every method returns once the server answered — for a write, once the data is durable — and
raises a :class:`~tailwater.errors.TailwaterError` subclass otherwise. Answers are the server's
JSON as dicts; the ``TypedDict`` classes below name their fields for type checkers.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, TypedDict
from urllib.parse import urlencode

from ._http import Transport, run_path, segment, topic_path
from ._names import check_topic
from .errors import TailwaterError

#: Statuses a run may have; the last five are terminal (docs/API.md, "Runs").
STATUSES = ("queued", "running", "success", "failed", "partialSuccess", "stopped", "cancelled")
TERMINAL_STATUSES = frozenset(STATUSES[2:])


class Run(TypedDict):
    pipeline: str
    runId: str
    id: str
    status: str
    cancelRequested: bool
    createdAt: str
    startedAt: Optional[str]
    endedAt: Optional[str]
    lastSeq: int
    logBytes: int
    meta: Dict[str, Any]


class _EntryFields(TypedDict):
    seq: int
    time: str
    kind: str


class Entry(_EntryFields, total=False):
    """One entry of a stream: ``log`` entries carry ``text`` and ``offset``, others ``data``."""

    text: str
    offset: int
    data: Any
    step: str
    correlationId: str
    id: str


class EntriesPage(TypedDict):
    entries: List[Entry]
    next: int
    hasMore: bool


class LogLines(TypedDict):
    """The last lines of a log and ``cursor``, the place their text ends (pass it to
    :func:`~tailwater.tail` as ``log_after`` to follow from there)."""

    text: str
    cursor: str


class AppendLogResult(TypedDict):
    seq: int
    firstSeq: int
    offset: int
    size: int
    duplicate: bool


class AppendEventsResult(TypedDict):
    first: int
    last: int
    duplicates: int
    seqs: List[int]


class NewEvent(TypedDict, total=False):
    kind: str
    data: Any
    step: str
    correlationId: str
    id: str


class Client:
    """A connection to one Tailwater server.

    ``server`` defaults to ``TAILWATER_SERVER``, else ``http://127.0.0.1:8585``; ``token`` to
    ``TAILWATER_TOKEN`` (sent as ``Authorization: Bearer``); ``timeout`` is per request, in
    seconds. One keep-alive connection is reused; calls from several threads take turns.
    """

    def __init__(
        self, server: Optional[str] = None, token: Optional[str] = None, timeout: float = 30.0
    ) -> None:
        self._http = Transport(server, token, timeout)

    @property
    def server(self) -> str:
        """The base URL in use, without a trailing slash."""
        return self._http.server

    @property
    def token(self) -> Optional[str]:
        return self._http.token

    def close(self) -> None:
        """Closes the kept-alive connection (a later call opens a new one)."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # Runs ---------------------------------------------------------------------------------

    def put_run(
        self, pipeline: str, run: str, status: str, meta: Optional[Mapping[str, Any]] = None
    ) -> Run:
        """Creates the run (and its pipeline) if new, and sets its status; ``meta`` replaces the
        stored one when given. A terminal run set back to a non-terminal status is a
        :class:`~tailwater.errors.Conflict`."""
        body: Dict[str, Any] = {"status": status}
        if meta is not None:
            body["meta"] = dict(meta)
        result: Run = self._http.json_request("PUT", run_path(pipeline, run), body)
        return result

    def finish_run(
        self,
        pipeline: str,
        run: str,
        status: str = "success",
        meta: Optional[Mapping[str, Any]] = None,
    ) -> Run:
        """Ends the run with a terminal status; its streams then end with ``runFinished``."""
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"{status!r} is not a terminal status ({', '.join(STATUSES[2:])}).")
        return self.put_run(pipeline, run, status, meta)

    def get_run(self, pipeline: str, run: str) -> Run:
        """The run (``run`` may be ``latest``); :class:`~tailwater.errors.NotFound` if unknown."""
        result: Run = self._http.json_request("GET", run_path(pipeline, run))
        return result

    def cancel_run(self, pipeline: str, run: str) -> Run:
        """Asks the run's runner to stop (202); asking again writes nothing more."""
        result: Run = self._http.json_request("POST", f"{run_path(pipeline, run)}/cancel")
        return result

    def delete_run(self, pipeline: str, run: str) -> None:
        """Removes the run and everything of it (an admin token, with authentication on)."""
        self._http.request("DELETE", run_path(pipeline, run))

    def list_pipelines(self) -> List[Dict[str, Any]]:
        """Every pipeline (``fqn``, ``id``, ``runs``, ``lastRun``), page after page."""
        return list(self._pages("/api/v1/pipelines", "pipelines", {"limit": 1000}))

    def list_runs(
        self, pipeline: str, status: Optional[str] = None, limit: Optional[int] = None
    ) -> List[Run]:
        """One page of the pipeline's runs, newest first (``limit`` 1–1000, default 50)."""
        query: Dict[str, Any] = {}
        if status is not None:
            query["status"] = status
        if limit is not None:
            query["limit"] = limit
        page = self._http.json_request("GET", _with_query(_runs_path(pipeline), query))
        runs: List[Run] = page["runs"]
        return runs

    def iter_runs(self, pipeline: str, status: Optional[str] = None) -> Iterator[Run]:
        """Every run of the pipeline, newest first, fetched a page at a time."""
        query: Dict[str, Any] = {"limit": 1000}
        if status is not None:
            query["status"] = status
        return self._pages(_runs_path(pipeline), "runs", query)

    def list_topics(self) -> List[str]:
        """Every topic, the runs feed ``_runs`` included."""
        return list(self._pages("/api/v1/topics", "topics", {"limit": 1000}))

    def pipeline_stats(self) -> List[Dict[str, Any]]:
        """Runs and log bytes of every pipeline (``pipeline``, ``runs``, ``logBytes``)."""
        return list(self._pages("/api/v1/stats", "pipelines", {"limit": 1000}))

    # Appending ----------------------------------------------------------------------------

    def append_log(
        self,
        pipeline: str,
        run: str,
        text: str,
        step: Optional[str] = None,
        id: Optional[str] = None,
    ) -> AppendLogResult:
        """Appends log text (creating the run as ``running`` if new). With a producer ``id``, a
        retry of an append that was stored is answered with ``duplicate: true`` and stored once."""
        body: Dict[str, Any] = {"text": text}
        if step is not None:
            body["step"] = step
        if id is not None:
            body["id"] = id
        result: AppendLogResult = self._http.json_request(
            "POST", f"{run_path(pipeline, run)}/logs", body
        )
        return result

    def append_events(
        self, pipeline: str, run: str, events: Sequence[NewEvent]
    ) -> AppendEventsResult:
        """Appends 1–1000 events to a run, all or nothing; ``seqs`` has each one's seq."""
        return self._append_events(f"{run_path(pipeline, run)}/events", events)

    def append_topic_events(self, topic: str, events: Sequence[NewEvent]) -> AppendEventsResult:
        """Appends 1–1000 events to a topic, all or nothing."""
        check_topic(topic, write=True)
        return self._append_events(f"{topic_path(topic)}/events", events)

    def _append_events(self, path: str, events: Sequence[NewEvent]) -> AppendEventsResult:
        result: AppendEventsResult = self._http.json_request(
            "POST", path, {"events": [dict(event) for event in events]}
        )
        return result

    def _post_encoded(self, path: str, body: bytes) -> Any:
        """Posts a JSON body already encoded (the Publisher's: each event's ``data`` goes out
        as it was encoded when published) and returns the answer's JSON."""
        answer = self._http.request("POST", path, body, "application/json")
        try:
            return answer.json()
        except ValueError as error:
            raise TailwaterError(
                f"{self.server} answered POST {path} with something other than JSON; "
                "is it a Tailwater server?",
                answer.status,
            ) from error

    # Reading ------------------------------------------------------------------------------

    def entries(
        self,
        pipeline: str,
        run: str,
        after: int = 0,
        limit: int = 1000,
        kinds: Optional[Sequence[str]] = None,
    ) -> EntriesPage:
        """One page of a run's entries after the cursor ``after``; go on from ``next`` while
        ``hasMore``."""
        return self._entries(f"{run_path(pipeline, run)}/entries", after, limit, kinds)

    def topic_entries(
        self, topic: str, after: int = 0, limit: int = 1000, kinds: Optional[Sequence[str]] = None
    ) -> EntriesPage:
        """One page of a topic's entries (a topic never written reads as empty)."""
        return self._entries(f"{topic_path(topic)}/entries", after, limit, kinds)

    def iter_entries(
        self,
        pipeline: str,
        run: str,
        after: int = 0,
        kinds: Optional[Sequence[str]] = None,
    ) -> Iterator[Entry]:
        """Every entry of the run after ``after`` that is stored now, page after page."""
        while True:
            page = self.entries(pipeline, run, after, 1000, kinds)
            yield from page["entries"]
            if not page["hasMore"]:
                return
            after = page["next"]

    def _entries(
        self, path: str, after: int, limit: int, kinds: Optional[Sequence[str]]
    ) -> EntriesPage:
        query: Dict[str, Any] = {"after": after, "limit": limit}
        if kinds:
            query["kinds"] = ",".join(kinds)
        page: EntriesPage = self._http.json_request("GET", _with_query(path, query))
        return page

    def read_log(self, pipeline: str, run: str) -> str:
        """The run's whole log text (``log.txt``)."""
        answer = self._http.request("GET", f"{run_path(pipeline, run)}/log.txt")
        return answer.body.decode("utf-8")

    def last_log_lines(self, pipeline: str, run: str, count: int) -> LogLines:
        """The log's last ``count`` lines as text (``log.txt?lines=-<count>``, like ``tail -n``)
        and the cursor where that text ends. A log with no lines gives ``""`` and its cursor."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count: {count!r} must be a whole number of lines, 0 or more.")
        path = f"{run_path(pipeline, run)}/log.txt?lines=-{count}"
        # 416: the log has no lines (or none were asked for); its end is named all the same.
        answer = self._http.request("GET", path, also_ok=(416,))
        cursor = answer.headers.get("tailwater-log-cursor")
        if cursor is None:
            raise TailwaterError(
                f"{self._http.server} answered GET {path} without a Tailwater-Log-Cursor; "
                "is it an older Tailwater server?",
                answer.status,
            )
        text = answer.body.decode("utf-8") if answer.status != 416 else ""
        return {"text": text, "cursor": cursor}

    def search(self, q: str, **options: Any) -> Dict[str, Any]:
        """One page of a search across every run (docs/SEARCH.md): ``regex``, ``pipeline`` (a
        glob), ``status`` (a list), ``since``, ``until``, ``kind``, ``limit``, ``cursor`` (the
        last page's ``next``)."""
        query: Dict[str, Any] = {"q": q}
        for name, value in options.items():
            if value is None:
                continue
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, (list, tuple)):
                value = ",".join(str(item) for item in value)
            query[name] = value
        page: Dict[str, Any] = self._http.json_request("GET", _with_query("/api/v1/search", query))
        return page

    def ready(self) -> bool:
        """Whether ``/readyz`` answers 200 (the store answers); False when unreachable."""
        try:
            self._http.request("GET", "/readyz")
        except TailwaterError:
            return False
        return True

    def _pages(self, path: str, key: str, query: Dict[str, Any]) -> Iterator[Any]:
        after: Optional[str] = None
        while True:
            page_query = dict(query)
            if after is not None:
                page_query["after"] = after
            page = self._http.json_request("GET", _with_query(path, page_query))
            yield from page[key]
            after = page.get("next")
            if after is None:
                return


def _runs_path(pipeline: str) -> str:
    return f"/api/v1/pipelines/{segment(pipeline)}/runs"


def _with_query(path: str, query: Mapping[str, Any]) -> str:
    return f"{path}?{urlencode(query)}" if query else path


__all__ = [
    "AppendEventsResult",
    "AppendLogResult",
    "Client",
    "EntriesPage",
    "Entry",
    "LogLines",
    "NewEvent",
    "Run",
    "STATUSES",
    "TERMINAL_STATUSES",
]
