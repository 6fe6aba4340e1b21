"""A :class:`logging.Handler` that ships a program's log records to a run.

``logging.getLogger().addHandler(TailwaterHandler("etl.daily", "r42"))`` is all a job needs:
each record is formatted into one line (more for a traceback) and queued on a
:class:`~tailwater.Publisher`, whose thread sends it. The handler never blocks on the server and
never raises into the program; ``flush()`` waits (boundedly) for what was queued, and the
publisher flushes at interpreter exit.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from .publisher import Publisher

#: The default line: time, level, logger and message.
DEFAULT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TailwaterHandler(logging.Handler):
    """Sends formatted records to the run ``pipeline``/``run`` as log text.

    ``step`` labels every line; a record's own ``step`` (``logger.info(…, extra={"step":
    "train"})``) wins. ``flush_timeout`` bounds how long ``flush()`` waits, ``close_timeout``
    how long ``close()`` does. Other keyword arguments go to the :class:`Publisher` (``server``,
    ``token``, ``queue_size``, …); or pass a ``publisher`` of your own, which ``close()`` then
    flushes but does not close.
    """

    def __init__(
        self,
        pipeline: Optional[str] = None,
        run: Optional[str] = None,
        level: int = logging.NOTSET,
        *,
        step: Optional[str] = None,
        fmt: Optional[str] = DEFAULT_FORMAT,
        publisher: Optional[Publisher] = None,
        flush_timeout: float = 5.0,
        close_timeout: float = 5.0,
        **publisher_options: Any,
    ) -> None:
        super().__init__(level)
        if publisher is None:
            if pipeline is None or run is None:
                raise ValueError("TailwaterHandler needs pipeline and run (or a publisher).")
            publisher = Publisher(pipeline, run, **publisher_options)
            self._owns_publisher = True
        else:
            self._owns_publisher = False
        self.publisher = publisher
        self.step = step
        self.flush_timeout = flush_timeout
        self.close_timeout = close_timeout
        if fmt is not None:
            self.setFormatter(logging.Formatter(fmt))

    def emit(self, record: logging.LogRecord) -> None:
        """Formats the record and queues it; a failure goes to ``handleError``, never up."""
        try:
            line = self.format(record)
            step = getattr(record, "step", None)
            if not isinstance(step, str):
                step = self.step
            self.publisher.log(line if line.endswith("\n") else line + "\n", step=step)
        except RecursionError:  # as logging's own handlers do
            raise
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        """Waits up to ``flush_timeout`` seconds for what was queued to be sent."""
        self.publisher.flush(self.flush_timeout)

    def close(self) -> None:
        """Flushes (up to ``close_timeout``) and, if the handler made its publisher, closes it."""
        try:
            if self._owns_publisher:
                self.publisher.close(self.close_timeout)
            else:
                self.publisher.flush(self.close_timeout)
        finally:
            super().close()


__all__ = ["DEFAULT_FORMAT", "TailwaterHandler"]
