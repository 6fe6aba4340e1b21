"""TailwaterHandler: records from ``logging`` appear in the run, formatted, without ever
blocking or raising into the program."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import time
from typing import Any
import unittest
import uuid
from contextlib import redirect_stderr

import support
from tailwater import Backoff, Client, TailwaterHandler

server = support.ModuleServer("py.logging")
setUpModule = server.start
tearDownModule = server.cleanup
names = server.names


class LoggingHandlerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(server.url)
        self.addCleanup(self.client.close)
        self.logger = logging.getLogger(f"tailwater.test.{uuid.uuid4().hex[:8]}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False

    def handler(self, pipeline: str, run: str, **options: Any) -> TailwaterHandler:
        options.setdefault("server", server.url)
        handler = TailwaterHandler(pipeline, run, exit_timeout=0, **options)
        self.logger.addHandler(handler)
        self.addCleanup(self.logger.removeHandler, handler)
        self.addCleanup(handler.close)
        return handler

    def test_records_appear_in_the_run_formatted_one_per_line(self) -> None:
        pipeline, run = names()
        handler = self.handler(pipeline, run, level=logging.INFO, fmt="%(levelname)s %(name)s: %(message)s")
        self.logger.debug("not shipped: below the handler's level")
        self.logger.info("loaded %d rows from %s", 1200, "orders")
        self.logger.warning("caf\u00e9 \U0001f600")
        try:
            raise KeyError("missing")
        except KeyError:
            self.logger.exception("step failed")
        handler.flush()
        text = support.log_text(self.client, pipeline, run)
        name = self.logger.name
        lines = text.split("\n")
        self.assertEqual(lines[0], f"INFO {name}: loaded 1200 rows from orders")
        self.assertEqual(lines[1], f"WARNING {name}: caf\u00e9 \U0001f600")
        self.assertEqual(lines[2], f"ERROR {name}: step failed")
        self.assertEqual(lines[3], "Traceback (most recent call last):")
        self.assertIn("KeyError: 'missing'", text)
        self.assertTrue(text.endswith("\n"))
        self.assertNotIn("not shipped", text)

    def test_the_default_format_has_time_level_and_logger(self) -> None:
        pipeline, run = names()
        handler = self.handler(pipeline, run)
        self.logger.info("hello")
        handler.flush()
        text = support.log_text(self.client, pipeline, run)
        stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
        self.assertRegex(text, f"^{stamp} INFO {re.escape(self.logger.name)}: hello\n$")

    def test_a_records_step_labels_its_line(self) -> None:
        pipeline, run = names()
        handler = self.handler(pipeline, run, step="main", fmt="%(message)s")
        self.logger.info("in main")
        self.logger.info("in train", extra={"step": "train"})
        handler.flush()
        entries = list(self.client.iter_entries(pipeline, run, kinds=["log"]))
        self.assertEqual(
            [(e["text"], e.get("step")) for e in entries],
            [("in main\n", "main"), ("in train\n", "train")],
        )

    def test_it_never_blocks_nor_raises_when_the_server_is_away(self) -> None:
        pipeline, run = names()
        handler = self.handler(
            pipeline, run, server=f"http://127.0.0.1:{support.free_port()}", flush_timeout=0.2,
            close_timeout=0.2, backoff=Backoff(0.05, 0.1), queue_size=100,
        )
        started = time.monotonic()
        for i in range(2000):
            self.logger.info("record %d", i)
        self.assertLess(time.monotonic() - started, 2.0)
        started = time.monotonic()
        handler.flush()
        handler.close()
        self.assertLess(time.monotonic() - started, 3.0)
        self.assertEqual(handler.publisher.sent, 0)
        # Every record was dropped and counted: past the queue bound, or left over at close.
        self.assertEqual(handler.publisher.dropped, 2000)

    def test_a_record_that_cannot_be_formatted_goes_to_handle_error_not_up(self) -> None:
        pipeline, run = names()
        handler = self.handler(pipeline, run, fmt="%(message)s")
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            self.logger.info("%d rows", "not a number")  # a formatting error inside emit()
            self.logger.info("still logging")
        handler.flush()
        self.assertIn("--- Logging error ---", stderr.getvalue())
        self.assertEqual(support.log_text(self.client, pipeline, run), "still logging\n")

    def test_root_logger_setup_is_all_a_job_needs(self) -> None:
        pipeline, run = names()
        root = logging.getLogger()
        handler = TailwaterHandler(pipeline, run, server=server.url, exit_timeout=0)
        root.addHandler(handler)
        try:
            logging.getLogger("job.step").warning("through the root logger")
        finally:
            root.removeHandler(handler)
            handler.close()
        self.assertIn("WARNING job.step: through the root logger\n", support.log_text(self.client, pipeline, run))


    def test_records_logged_just_before_the_program_exits_are_delivered(self) -> None:
        pipeline, run = names()
        script = (
            "import logging, sys\n"
            "from tailwater import TailwaterHandler\n"
            "logging.getLogger().addHandler(TailwaterHandler(sys.argv[1], sys.argv[2]))\n"
            "for i in range(500):\n"
            "    logging.getLogger('job').warning('line %d', i)\n"
            # no flush, no close: the exit does it
        )
        env = {
            **os.environ,
            "PYTHONPATH": str(support.PACKAGE_ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "TAILWATER_SERVER": server.url,
        }
        done = subprocess.run(
            [sys.executable, "-c", script, pipeline, run],
            env=env, capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = support.log_text(self.client, pipeline, run).splitlines()
        self.assertEqual(len(lines), 500)
        self.assertTrue(all(line.endswith(f" WARNING job: line {i}") for i, line in enumerate(lines)))


if __name__ == "__main__":
    unittest.main()
