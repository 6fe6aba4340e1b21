"""A publisher that never blocks the program that produces logs and events.

``log()`` and ``event()`` only check their arguments and queue; a daemon thread sends the queue
in order, in batches, retrying a failed send with capped exponential backoff. Every queued item
carries a producer id (``<uuid>-<n>``), so a retry whose first attempt did reach the server is
acknowledged with the original seqs and stored once (docs/API.md, "Entries"). When the queue is
full the **oldest** item is dropped and counted in ``dropped``: the newest state is what matters
to a viewer. These are the semantics of the TypeScript SDK's Publisher (docs/SDK.md), extended
with log text.
"""

from __future__ import annotations

import atexit
import json
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, List, Optional

from ._backoff import Backoff
from ._http import run_path, topic_path
from ._names import check_event_kind, check_label, check_topic, scrub_surrogates
from .client import Client
from .errors import TailwaterError

#: The most log text one append may carry (the server's ``maxAppendBytes``).
MAX_APPEND_BYTES = 8 * 1024 * 1024
#: The largest event ``data``, JSON-encoded, the server takes (``maxEventBytes``).
MAX_EVENT_BYTES = 64 * 1024
#: Events per request the server takes at most.
MAX_BATCH_EVENTS = 1000


@dataclass
class _Item:
    """One queued log text or event, already encoded: what is sent does not change if the
    caller mutates its data later, and a retry sends exactly the same bytes."""

    id: str
    is_log: bool
    size: int
    text: str = ""
    kind: str = ""
    data_json: str = "null"
    step: Optional[str] = None
    correlation_id: Optional[str] = None


@dataclass
class _Batch:
    path: str
    body: bytes
    items: int
    is_log: bool


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class Publisher:
    """Publishes log text and events to a run (``pipeline`` and ``run``) or, events only, to a
    ``topic``, from a background thread.

    Options: ``queue_size`` items held while the server is slow or away (4096; past it the
    oldest is dropped and counted); ``batch_size`` events per request (64); ``max_log_bytes``
    of log text merged into one append (1 MiB); ``max_event_bytes`` of JSON ``data`` accepted
    locally (64 KiB, the server's limit); ``backoff`` between retries; ``on_error``, told of
    each failed send (it is retried) and of each batch the server refused (dropped);
    ``exit_timeout``, seconds to flush for at interpreter exit (0 to skip). ``server``,
    ``token`` and ``timeout`` (per request) are the :class:`~tailwater.Client`'s.

    Counters: ``sent`` (items acknowledged), ``duplicates`` (of those, acknowledged as already
    stored: a retry of a send whose answer was lost), ``dropped`` (queue overflow, refused
    batches, a 501, and what ``close()`` left behind), ``pending`` (queued or being sent).
    Once nothing is pending, ``sent + dropped`` is every item ``log()``/``event()`` accepted.
    """

    def __init__(
        self,
        pipeline: Optional[str] = None,
        run: Optional[str] = None,
        *,
        topic: Optional[str] = None,
        server: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 30.0,
        queue_size: int = 4096,
        batch_size: int = 64,
        max_log_bytes: int = 1024 * 1024,
        max_event_bytes: int = MAX_EVENT_BYTES,
        backoff: Backoff = Backoff(),
        on_error: Optional[Callable[[TailwaterError], None]] = None,
        exit_timeout: float = 5.0,
    ) -> None:
        if topic is not None:
            if pipeline is not None or run is not None:
                raise ValueError("Give either pipeline and run, or topic, not both.")
            self._path = topic_path(check_topic(topic, write=True))
        elif pipeline is None or run is None:
            raise ValueError("A Publisher needs pipeline and run (or topic).")
        else:
            self._path = run_path(pipeline, run)
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1.")
        if not 1 <= batch_size <= MAX_BATCH_EVENTS:
            raise ValueError(f"batch_size must be 1–{MAX_BATCH_EVENTS}.")
        self.pipeline = pipeline
        self.run = run
        self.topic = topic
        self.sent = 0
        self.duplicates = 0
        self.dropped = 0
        self.disabled = False
        self._client = Client(server, token, timeout)
        self._queue: Deque[_Item] = deque()
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._max_log_bytes = max(1, min(max_log_bytes, MAX_APPEND_BYTES))
        self._max_event_bytes = max_event_bytes
        self._backoff = backoff
        self._on_error = on_error
        self._prefix = str(uuid.uuid4())
        self._counter = 0
        self._in_flight = 0
        self._closed = False
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._exit_timeout = exit_timeout
        # Started now, not on the first item: a thread cannot be started at interpreter exit,
        # when the logging handler may still be handed records.
        self._thread = threading.Thread(target=self._pump, name="tailwater-publisher", daemon=True)
        self._thread.start()
        if exit_timeout > 0:
            atexit.register(self._at_exit)

    @property
    def server(self) -> str:
        return self._client.server

    @property
    def pending(self) -> int:
        """Items waiting to be sent, or being sent."""
        with self._cond:
            return len(self._queue) + self._in_flight

    @property
    def closed(self) -> bool:
        return self._closed

    def log(self, text: str, step: Optional[str] = None) -> None:
        """Queues log text, as is (add the line ends you want), and returns at once.

        Empty text is ignored. Lone surrogates become U+FFFD (UTF-8 cannot carry them). A bad
        ``step``, text over 8 MiB, or a topic publisher raises here, without a request.
        """
        if self.topic is not None:
            raise TypeError("A topic has no log: publish events to it with event().")
        if not isinstance(text, str):
            raise TypeError(f"text must be a str (was {type(text).__name__}).")
        if step is not None:
            check_label("step", step)
        if not text:
            return
        text = scrub_surrogates(text)
        size = len(text.encode("utf-8"))
        if size > MAX_APPEND_BYTES:
            raise ValueError(f"Log text exceeds {MAX_APPEND_BYTES} bytes (was {size}).")
        self._enqueue(lambda id: _Item(id=id, is_log=True, size=size, text=text, step=step))

    def event(
        self,
        kind: str,
        data: Any = None,
        step: Optional[str] = None,
        correlation_id: Optional[str] = None,
    ) -> None:
        """Queues an event and returns at once. ``data`` is encoded to JSON now (later changes
        to it are not sent). A reserved or malformed kind, data that is not JSON (NaN
        included) or over ``max_event_bytes``, or a bad step/correlation id raises here."""
        check_event_kind(kind)
        if step is not None:
            check_label("step", step)
        if correlation_id is not None:
            check_label("correlationId", correlation_id)
        try:
            data_json = _dumps(data)
            size = len(data_json.encode("utf-8"))
        except (TypeError, ValueError) as error:
            raise ValueError(f"Event data is not JSON: {error}") from error
        if size > self._max_event_bytes:
            raise ValueError(f"Event data exceeds {self._max_event_bytes} bytes (was {size}).")
        self._enqueue(
            lambda id: _Item(
                id=id,
                is_log=False,
                size=size,
                kind=kind,
                data_json=data_json,
                step=step,
                correlation_id=correlation_id,
            )
        )

    def _enqueue(self, make: Callable[[str], _Item]) -> None:
        with self._cond:
            if self.disabled or self._closed:
                return
            self._counter += 1
            self._queue.append(make(f"{self._prefix}-{self._counter}"))
            if len(self._queue) > self._queue_size:
                self._queue.popleft()
                self.dropped += 1
            self._cond.notify_all()

    def flush(self, timeout: Optional[float] = 5.0) -> bool:
        """Waits until nothing is pending — everything queued was acknowledged, or dropped and
        counted — and returns True; False if ``timeout`` seconds passed first (None: no limit).
        It does not stop sending."""
        if threading.current_thread() is self._thread:
            return False  # called from on_error: waiting for itself would never end
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._queue and self._in_flight == 0, timeout=timeout
            )

    def close(self, timeout: Optional[float] = 5.0) -> bool:
        """Flushes for up to ``timeout`` seconds, then stops: what is still queued (or being
        sent) is counted in ``dropped``, and later calls of ``log()``/``event()`` do nothing.
        Returns what ``flush`` returned."""
        if self._closed:
            return self.pending == 0
        flushed = self.flush(timeout)
        with self._cond:
            self._closed = True
            self.dropped += len(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        self._stop.set()
        if threading.current_thread() is not self._thread:
            if self._thread.is_alive() and self._in_flight:
                self._client._http.abort()  # a send still going after the flush gave up
            self._thread.join(5.0)
        try:
            atexit.unregister(self._at_exit)
        except Exception:  # pragma: no cover - interpreter shutting down
            pass
        return flushed

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _at_exit(self) -> None:
        self.close(self._exit_timeout)

    # The sending thread -------------------------------------------------------------------

    def _take_batch(self) -> _Batch:
        """Takes the next batch off the queue (the lock held): consecutive events up to
        ``batch_size``, or consecutive log texts of one step merged up to ``max_log_bytes``."""
        first = self._queue.popleft()
        taken: List[_Item] = [first]
        if first.is_log:
            size = first.size
            while self._queue:
                item = self._queue[0]
                fits = size + item.size <= self._max_log_bytes
                if not item.is_log or item.step != first.step or not fits:
                    break
                taken.append(self._queue.popleft())
                size += item.size
            body = {"text": "".join(item.text for item in taken), "id": first.id}
            if first.step is not None:
                body["step"] = first.step
            return _Batch(f"{self._path}/logs", _dumps(body).encode("utf-8"), len(taken), True)
        while self._queue and len(taken) < self._batch_size and not self._queue[0].is_log:
            taken.append(self._queue.popleft())
        events = ",".join(_event_json(item) for item in taken)
        body_text = '{"events":[' + events + "]}"
        return _Batch(f"{self._path}/events", body_text.encode("utf-8"), len(taken), False)

    def _pump(self) -> None:
        failures = 0
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: bool(self._queue) or self._closed)
                    if self._closed:
                        return
                    batch = self._take_batch()
                    self._in_flight = batch.items
                failures = self._send(batch, failures)
                with self._cond:
                    self._in_flight = 0
                    self._cond.notify_all()
        finally:
            self._client.close()

    def _send(self, batch: _Batch, failures: int) -> int:
        """Sends one batch, the same bytes until the server takes or refuses it; returns the
        count of consecutive failures so far."""
        while True:
            try:
                answer = self._client._post_encoded(batch.path, batch.body)
                duplicates = _duplicates(answer, batch)
                with self._cond:
                    self.sent += batch.items
                    self.duplicates += duplicates
                return 0
            except Exception as caught:  # noqa: BLE001 - nothing may escape into the thread
                error = (
                    caught
                    if isinstance(caught, TailwaterError)
                    else TailwaterError(f"{type(caught).__name__}: {caught}", 0)
                )
                self._report(error)
                if error.status == 501:
                    with self._cond:
                        self.disabled = True
                        self.dropped += batch.items + len(self._queue)
                        self._queue.clear()
                    return 0
                if not error.retryable or self._stop.is_set():
                    with self._cond:
                        self.dropped += batch.items
                    return failures
                failures += 1
                wait = error.retry_after or self._backoff.delay(failures - 1)
                if self._stop.wait(wait):
                    with self._cond:
                        self.dropped += batch.items
                    return failures

    def _report(self, error: TailwaterError) -> None:
        if self._on_error is None:
            return
        try:
            self._on_error(error)
        except Exception:  # noqa: BLE001 - a failing callback must not stop the sending
            pass


def _event_json(item: _Item) -> str:
    parts = ['{"kind":', _dumps(item.kind), ',"data":', item.data_json]
    if item.step is not None:
        parts += [',"step":', _dumps(item.step)]
    if item.correlation_id is not None:
        parts += [',"correlationId":', _dumps(item.correlation_id)]
    parts += [',"id":', _dumps(item.id), "}"]
    return "".join(parts)


def _duplicates(answer: Any, batch: _Batch) -> int:
    if not isinstance(answer, dict):
        return 0
    if batch.is_log:
        return batch.items if answer.get("duplicate") is True else 0
    count = answer.get("duplicates")
    return count if isinstance(count, int) else 0


__all__ = ["Publisher", "MAX_APPEND_BYTES", "MAX_EVENT_BYTES"]

