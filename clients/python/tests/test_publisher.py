"""Publisher against a real server: order, exactly-once through retries, the queue bound,
a server that goes away and comes back, flush and close."""

from __future__ import annotations

import threading
import time
import unittest
import uuid
from typing import Any, List

import support
from tailwater import Backoff, Client, Publisher, TailwaterError

#: Retries come quickly in tests (the default starts at 250 ms).
FAST = Backoff(initial=0.02, maximum=0.2)

server = support.ModuleServer("py.publisher")
setUpModule = server.start
tearDownModule = server.cleanup
names = server.names


class PublisherTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(server.url)
        self.addCleanup(self.client.close)

    def publisher(self, pipeline: str, run: str, url: str = "", **options: Any) -> Publisher:
        options.setdefault("backoff", FAST)
        publisher = Publisher(pipeline, run, server=url or server.url, exit_timeout=0, **options)
        self.addCleanup(publisher.close, 1)
        return publisher

    def test_logs_and_events_arrive_once_in_the_order_published(self) -> None:
        pipeline, run = names()
        publisher = self.publisher(pipeline, run, batch_size=7)
        expected_log = ""
        for i in range(300):
            line = f"line {i} caf\u00e9\n"
            publisher.log(line)
            expected_log += line
            if i % 10 == 9:
                publisher.event("progress", {"i": i}, step="train", correlation_id="c-1")
        self.assertTrue(publisher.flush(20))
        counters = (publisher.sent, publisher.dropped, publisher.duplicates, publisher.pending)
        self.assertEqual(counters, (330, 0, 0, 0))

        entries = list(self.client.iter_entries(pipeline, run))
        self.assertEqual([e["seq"] for e in entries], list(range(1, len(entries) + 1)))
        self.assertEqual(support.log_text(self.client, pipeline, run), expected_log)
        progress = [e for e in entries if e["kind"] == "progress"]
        self.assertEqual([e["data"]["i"] for e in progress], list(range(9, 300, 10)))
        self.assertTrue(all(e["step"] == "train" and e["correlationId"] == "c-1" for e in progress))
        # Interleaving is kept: the log text before each event holds exactly the lines before it.
        text_before = ""
        for entry in entries:
            if entry["kind"] == "log":
                text_before += entry["text"]
            elif entry["kind"] == "progress":
                self.assertTrue(text_before.endswith(f"line {entry['data']['i']} caf\u00e9\n"))
                self.assertEqual(text_before.count("\n"), entry["data"]["i"] + 1)
        # Every event carries its own producer id.
        self.assertEqual(len({e["id"] for e in progress}), len(progress))

    def test_retries_after_lost_answers_store_each_line_and_event_once(self) -> None:
        pipeline, run = names()
        # Every other answer is lost: the server stored the request, the client never hears so.
        proxy = support.AnswerCuttingProxy(server.port, cut=lambda n: n % 2 == 1)
        self.addCleanup(proxy.close)
        errors: List[TailwaterError] = []
        publisher = self.publisher(
            pipeline, run, proxy.url, batch_size=5, max_log_bytes=64, on_error=errors.append
        )
        lines = [f"line {i:03d}\n" for i in range(60)]
        for i, line in enumerate(lines):
            publisher.log(line)
            publisher.event("tick", {"i": i})
        self.assertTrue(publisher.flush(30))

        self.assertGreaterEqual(proxy.cuts, 10)
        self.assertEqual(len(errors), proxy.cuts)
        self.assertTrue(all(error.status == 0 for error in errors))
        self.assertEqual((publisher.sent, publisher.dropped), (120, 0))
        # The server had each cut request already: the retry was acknowledged as a duplicate.
        self.assertGreaterEqual(publisher.duplicates, proxy.cuts)
        self.assertEqual(support.log_text(self.client, pipeline, run), "".join(lines))
        ticks = [e["data"]["i"] for e in self.client.iter_entries(pipeline, run, kinds=["tick"])]
        self.assertEqual(ticks, list(range(60)))

    def test_a_full_queue_drops_the_oldest_and_counts_them(self) -> None:
        pipeline, run = names()
        gate = support.GateProxy(server.port)
        self.addCleanup(gate.close)
        publisher = self.publisher(pipeline, run, gate.url, queue_size=10)
        publisher.event("n", {"n": 0})
        # The first event is in flight (its request hangs at the gate); now 30 more are queued.
        support.wait_until(gate.requests_started.is_set, 10, "the first request to reach the gate")
        started = time.monotonic()
        for n in range(1, 31):
            publisher.event("n", {"n": n})
        self.assertLess(time.monotonic() - started, 1.0, "event() must not wait for the server")
        self.assertEqual((publisher.dropped, publisher.pending), (20, 11))
        gate.open()
        self.assertTrue(publisher.flush(20))
        self.assertEqual((publisher.sent, publisher.dropped), (11, 20))
        stored = [e["data"]["n"] for e in self.client.iter_entries(pipeline, run, kinds=["n"])]
        self.assertEqual(stored, [0] + list(range(21, 31)))

    def test_close_cuts_a_send_that_hangs_and_counts_it_dropped(self) -> None:
        pipeline, run = names()
        gate = support.GateProxy(server.port)  # never opened: the request hangs unanswered
        self.addCleanup(gate.close)
        publisher = self.publisher(pipeline, run, gate.url)
        for n in range(3):
            publisher.event("n", {"n": n})
        support.wait_until(gate.requests_started.is_set, 10, "a request to reach the gate")
        started = time.monotonic()
        self.assertFalse(publisher.close(0.3))
        self.assertLess(time.monotonic() - started, 3.0)
        self.assertFalse(publisher._thread.is_alive())
        self.assertEqual((publisher.sent, publisher.dropped, publisher.pending), (0, 3, 0))

    def test_flush_and_close_give_up_in_time_when_the_server_is_unreachable(self) -> None:
        pipeline, run = names()
        errors: List[TailwaterError] = []
        publisher = self.publisher(
            pipeline, run, f"http://127.0.0.1:{support.free_port()}", on_error=errors.append
        )
        for i in range(5):
            publisher.log(f"{i}\n")
        started = time.monotonic()
        self.assertFalse(publisher.flush(0.5))
        self.assertFalse(publisher.close(0.2))
        self.assertLess(time.monotonic() - started, 3.0)
        support.wait_until(lambda: len(errors) > 0, 5, "a failed send reported")
        self.assertTrue(all(error.retryable for error in errors))
        self.assertEqual((publisher.sent, publisher.dropped, publisher.pending), (0, 5, 0))
        publisher.log("after close\n")  # ignored, without raising
        self.assertEqual(publisher.pending, 0)

    def test_a_batch_the_server_refuses_is_dropped_and_reported(self) -> None:
        pipeline, run = names()
        errors: List[TailwaterError] = []
        publisher = self.publisher(pipeline, run, on_error=errors.append)
        publisher.event("ok", {"n": 1})
        self.assertTrue(publisher.flush(10))
        # Run names are not checked locally: the server refuses this one (a bidi override), and
        # the batch is dropped and counted, not retried.
        bad = Publisher("py.publisher.bad\u202e", "r1", server=server.url, exit_timeout=0, on_error=errors.append)
        self.addCleanup(bad.close, 1)
        bad.event("ok", {"n": 2})
        self.assertTrue(bad.flush(10))
        self.assertEqual((bad.sent, bad.dropped), (0, 1))
        self.assertEqual([(e.status, e.code) for e in errors], [(400, "TW_BAD_NAME")])

    def test_a_501_disables_the_publisher_and_drops_what_it_held(self) -> None:
        url, seen = support.canned_server(
            self, 501, b'{"error":{"code":"TW_NOT_IMPLEMENTED","message":"no events here"}}'
        )
        errors: List[TailwaterError] = []
        publisher = self.publisher("p", "r", url, on_error=errors.append)
        publisher.event("a", 1)
        self.assertTrue(publisher.flush(10))
        publisher.event("b", 2)  # ignored now
        self.assertTrue(publisher.disabled)
        self.assertEqual((publisher.sent, publisher.dropped, publisher.pending), (0, 1, 0))
        self.assertEqual(
            [(r["method"], r["path"]) for r in seen], [("POST", "/api/v1/pipelines/p/runs/r/events")]
        )
        self.assertEqual([(e.status, e.code) for e in errors], [(501, "TW_NOT_IMPLEMENTED")])

    def test_local_refusals_raise_at_the_call(self) -> None:
        pipeline, run = names()
        publisher = self.publisher(pipeline, run, max_event_bytes=100)
        for kind in ("end", "status", "log", "bad kind", ""):
            with self.subTest(kind=kind), self.assertRaises(ValueError):
                publisher.event(kind, {})
        with self.assertRaises(ValueError):
            publisher.event("big", "x" * 200)
        with self.assertRaises(ValueError):
            publisher.event("nan", float("nan"))
        with self.assertRaises(ValueError):
            publisher.event("obj", object())
        with self.assertRaises(ValueError):
            publisher.log("x\n", step="bad\nstep")
        topic = Publisher(topic="py-pub", server=server.url, exit_timeout=0)
        self.addCleanup(topic.close, 1)
        with self.assertRaises(TypeError):
            topic.log("a topic has no log\n")
        self.assertEqual(publisher.pending + topic.pending, 0)

    def test_data_is_taken_when_published_and_topics_take_events(self) -> None:
        topic = f"py-pub-{uuid.uuid4().hex[:8]}"
        publisher = Publisher(topic=topic, server=server.url, exit_timeout=0)
        self.addCleanup(publisher.close, 1)
        data = {"table": "t1", "snapshotId": 2**63 + 1}
        publisher.event("commit", data)
        data["table"] = "changed after publish"
        self.assertTrue(publisher.close(10))
        entries = self.client.topic_entries(topic)["entries"]
        self.assertEqual([e["data"] for e in entries], [{"table": "t1", "snapshotId": 2**63 + 1}])

    def test_logging_from_many_threads_loses_nothing(self) -> None:
        pipeline, run = names()
        publisher = self.publisher(pipeline, run)

        def produce(t: int) -> None:
            for i in range(200):
                publisher.log(f"t{t} {i}\n")

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        self.assertTrue(publisher.flush(20))
        lines = support.log_text(self.client, pipeline, run).splitlines()
        self.assertEqual(sorted(lines), sorted(f"t{t} {i}" for t in range(4) for i in range(200)))
        for t in range(4):  # each thread's lines in its own order
            own = [line for line in lines if line.startswith(f"t{t} ")]
            self.assertEqual(own, [f"t{t} {i}" for i in range(200)])


class ServerRestartTest(unittest.TestCase):
    """The server goes away mid-run and comes back on the same port and data."""

    def test_nothing_within_the_queue_bound_is_lost_or_duplicated(self) -> None:
        own = support.ServerProcess().start()
        self.addCleanup(own.cleanup)
        pipeline, run = names()
        errors: List[TailwaterError] = []
        publisher = Publisher(
            pipeline, run, server=own.url, backoff=FAST, exit_timeout=0, queue_size=1000, on_error=errors.append
        )
        self.addCleanup(publisher.close, 1)
        for i in range(100):
            publisher.log(f"before {i}\n")
            publisher.event("step", {"i": i})
        self.assertTrue(publisher.flush(20))

        own.stop()
        for i in range(300):  # while the server is down: queued, within the bound of 1000
            publisher.log(f"during {i}\n")
            publisher.event("step", {"i": 100 + i})
        support.wait_until(lambda: len(errors) >= 2, 10, "sends failing while the server is down")
        self.assertFalse(publisher.flush(0.2))
        self.assertGreater(publisher.pending, 0)

        own.start()
        for i in range(50):
            publisher.log(f"after {i}\n")
            publisher.event("step", {"i": 400 + i})
        self.assertTrue(publisher.flush(30))
        self.assertEqual((publisher.sent, publisher.dropped), (900, 0))

        client = Client(own.url)
        self.addCleanup(client.close)
        expected = (
            "".join(f"before {i}\n" for i in range(100))
            + "".join(f"during {i}\n" for i in range(300))
            + "".join(f"after {i}\n" for i in range(50))
        )
        self.assertEqual(support.log_text(client, pipeline, run), expected)
        steps = [e["data"]["i"] for e in client.iter_entries(pipeline, run, kinds=["step"])]
        self.assertEqual(steps, list(range(450)))


if __name__ == "__main__":
    unittest.main()
