"""tail() against a real server: to the end, resume by cursor, reconnect after cuts."""

from __future__ import annotations

import unittest
import uuid
from typing import List

import support
from tailwater import BadRequest, Backoff, Client, ConnectionFailed, NotFound, TailEvent, tail

FAST = Backoff(initial=0.02, maximum=0.2)

server = support.ModuleServer("py.tail")
setUpModule = server.start
tearDownModule = server.cleanup
names = server.names


class TailTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(server.url)
        self.addCleanup(self.client.close)

    def write_lines(self, pipeline: str, run: str, start: int, stop: int) -> None:
        for i in range(start, stop):
            self.client.append_log(pipeline, run, f"line {i}\n")

    def test_a_finished_run_is_followed_to_its_end(self) -> None:
        pipeline, run = names()
        self.client.put_run(pipeline, run, "running")
        self.write_lines(pipeline, run, 0, 20)
        self.client.append_events(pipeline, run, [{"kind": "progress", "data": {"pct": 100}}])
        self.client.finish_run(pipeline, run, "success")
        events = list(tail(pipeline, run, server=server.url, read_timeout=20))
        self.assertEqual(events[0].type, "open")
        self.assertEqual(events[-1].type, "end")
        self.assertEqual(events[-1].end, {"reason": "runFinished", "status": "success", "lastSeq": 23})
        entries = [e for e in events if e.type == "entry"]
        self.assertEqual([e.entry["seq"] for e in entries], list(range(1, 24)))
        text = "".join(e.entry.get("text", "") for e in entries)
        self.assertEqual(text, "".join(f"line {i}\n" for i in range(20)))
        self.assertTrue(all(e.cursor and e.cursor.startswith(f"{e.entry['seq']}-") for e in entries))
        self.assertIn('"pct":100', entries[-2].json or "")

    def test_stopping_mid_run_and_resuming_by_cursor_misses_and_repeats_nothing(self) -> None:
        pipeline, run = names()
        self.write_lines(pipeline, run, 0, 30)
        seen: List[str] = []
        cursor = None
        for event in tail(pipeline, run, server=server.url, read_timeout=20):
            if event.type == "entry":
                seen.append(event.entry.get("text", ""))
                cursor = event.cursor
                if len(seen) == 12:
                    break  # leaves the loop: the connection is closed
        self.assertIsNotNone(cursor)
        self.write_lines(pipeline, run, 30, 50)  # written while nobody watched
        self.client.finish_run(pipeline, run, "success")
        resumed = list(tail(pipeline, run, server=server.url, after=cursor, read_timeout=20))
        seen += [e.entry.get("text", "") for e in resumed if e.type == "entry"]
        self.assertEqual(resumed[-1].type, "end")
        # The first entry is the run's status (the first append created it), then 50 lines.
        self.assertEqual(seen[0], "")
        self.assertEqual(seen[1:-1], [f"line {i}\n" for i in range(50)])
        self.assertEqual(seen[-1], "")  # the final status entry

    def test_a_stream_cut_again_and_again_resumes_with_every_entry_once(self) -> None:
        pipeline, run = names()
        self.write_lines(pipeline, run, 0, 200)
        self.client.finish_run(pipeline, run, "success")
        proxy = support.StreamCuttingProxy(server.port, cuts=5, after_bytes=1500)
        self.addCleanup(proxy.close)
        events = list(tail(pipeline, run, server=proxy.url, read_timeout=20, backoff=FAST, max_retries=3))
        self.assertEqual(proxy.cuts, 5)
        self.assertEqual(len([e for e in events if e.type == "reconnecting"]), 5)
        self.assertEqual(len([e for e in events if e.type == "open"]), 6)
        seqs = [e.entry["seq"] for e in events if e.type == "entry"]
        self.assertEqual(seqs, list(range(1, 203)))
        self.assertEqual(events[-1].type, "end")

    def test_a_filtered_stream_resumes_after_the_entries_it_skipped(self) -> None:
        pipeline, run = names()
        for i in range(10):
            self.client.append_log(pipeline, run, f"noise {i}\n")
            self.client.append_events(pipeline, run, [{"kind": "progress", "data": {"i": i}}])
        self.client.finish_run(pipeline, run, "success")
        events = list(tail(pipeline, run, server=server.url, kinds=["progress"], read_timeout=20))
        progress = [e.entry["data"]["i"] for e in events if e.type == "entry"]
        self.assertEqual(progress, list(range(10)))
        self.assertEqual(events[-1].type, "end")
        # Resuming from the last progress entry's cursor yields nothing again.
        last_cursor = [e.cursor for e in events if e.type == "entry"][-1]
        again = list(
            tail(pipeline, run, server=server.url, kinds=["progress"], after=last_cursor, read_timeout=20)
        )
        self.assertEqual([e.type for e in again], ["open", "end"])

    def test_a_cursor_from_another_store_is_told_as_a_gap_reset(self) -> None:
        pipeline, run = names()
        self.write_lines(pipeline, run, 0, 3)
        self.client.finish_run(pipeline, run, "success")
        events = list(tail(pipeline, run, server=server.url, after="2-00000000", read_timeout=20))
        types = [e.type for e in events]
        self.assertEqual(types[:2], ["open", "gap"])
        self.assertEqual(events[1].gap, {"reason": "reset"})
        self.assertEqual([e.entry["seq"] for e in events if e.type == "entry"], [1, 2, 3, 4, 5])

    def test_the_last_lines_then_the_stream_from_where_they_end_give_every_line_once(self) -> None:
        pipeline, run = names()
        self.client.put_run(pipeline, run, "running")
        self.write_lines(pipeline, run, 0, 5)
        self.client.append_events(pipeline, run, [{"kind": "progress", "data": {"pct": 50}}])
        self.write_lines(pipeline, run, 5, 10)
        last = self.client.last_log_lines(pipeline, run, 3)
        self.assertEqual(last["text"], "line 7\nline 8\nline 9\n")
        self.write_lines(pipeline, run, 10, 12)  # after the text was read
        self.client.finish_run(pipeline, run, "success")
        events = list(tail(pipeline, run, server=server.url, log_after=last["cursor"], read_timeout=20))
        entries = [e.entry for e in events if e.type == "entry"]
        text = "".join(e.get("text", "") for e in entries if e["kind"] == "log")
        self.assertEqual(last["text"] + text, "line 7\nline 8\nline 9\nline 10\nline 11\n")
        # Every other entry still comes, the event written among the lines left out included.
        self.assertEqual([e["kind"] for e in entries if e["kind"] != "log"], ["status", "progress", "status"])
        self.assertEqual(events[-1].end, {"reason": "runFinished", "status": "success", "lastSeq": 15})

    def test_a_stream_that_starts_over_forgets_log_after_and_loses_no_line_across_a_cut(self) -> None:
        pipeline, run = names()
        self.write_lines(pipeline, run, 0, 200)
        self.client.finish_run(pipeline, run, "success")
        last = self.client.last_log_lines(pipeline, run, 3)
        proxy = support.StreamCuttingProxy(server.port, cuts=1, after_bytes=1500)
        self.addCleanup(proxy.close)
        # A cursor of another store: the stream starts over from seq 1 and the whole log comes,
        # so log_after (which names this log's end) must not be sent again after the cut.
        events = list(
            tail(
                pipeline,
                run,
                server=proxy.url,
                after="5-00000000",
                log_after=last["cursor"],
                read_timeout=20,
                backoff=FAST,
            )
        )
        self.assertEqual(proxy.cuts, 1)
        self.assertEqual([e.gap for e in events if e.type == "gap"], [{"reason": "reset"}])
        self.assertEqual([e.type for e in events].count("reconnecting"), 1)
        self.assertEqual([e.entry["seq"] for e in events if e.type == "entry"], list(range(1, 203)))

    def test_the_last_lines_of_an_empty_log_are_empty_and_a_bad_count_is_refused(self) -> None:
        pipeline, run = names()
        self.client.put_run(pipeline, run, "running")
        empty = self.client.last_log_lines(pipeline, run, 5)
        self.assertEqual(empty["text"], "")
        self.write_lines(pipeline, run, 0, 2)
        self.client.finish_run(pipeline, run, "success")
        lines = [
            e.entry["text"]
            for e in tail(pipeline, run, server=server.url, log_after=empty["cursor"], read_timeout=20)
            if e.type == "entry" and e.entry["kind"] == "log"
        ]
        self.assertEqual(lines, ["line 0\n", "line 1\n"])
        self.assertEqual(self.client.last_log_lines(pipeline, run, 0)["text"], "")
        for bad in (-1, 1.5, True):
            with self.assertRaises(ValueError):
                self.client.last_log_lines(pipeline, run, bad)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            next(iter(tail(topic="t", server=server.url, log_after=empty["cursor"])))
        with self.assertRaises(NotFound):
            self.client.last_log_lines(pipeline, "no-such-run", 5)

    def test_topics_stream_and_last_n_starts_near_the_end(self) -> None:
        topic = f"py-tail-{uuid.uuid4().hex[:8]}"
        self.client.append_topic_events(topic, [{"kind": "commit", "data": {"n": n}} for n in range(10)])
        got: List[TailEvent] = []
        for event in tail(topic=topic, server=server.url, last=3, read_timeout=20):
            if event.type == "entry":
                got.append(event)
                if len(got) == 3:
                    break
        self.assertEqual([e.entry["data"]["n"] for e in got], [7, 8, 9])

    def test_refusals_raise_at_once_and_an_unreachable_server_gives_up(self) -> None:
        with self.assertRaises(BadRequest) as refused:
            next(iter(tail("p", "r", server=server.url, last=-1)))
        self.assertEqual((refused.exception.status, refused.exception.code), (400, "TW_BAD_QUERY"))
        dead = f"http://127.0.0.1:{support.free_port()}"
        events: List[str] = []
        with self.assertRaises(ConnectionFailed):
            for event in tail("p", "r", server=dead, max_retries=2, backoff=FAST, read_timeout=5):
                events.append(event.type)
        self.assertEqual(events, ["reconnecting", "reconnecting"])


class TailAcrossRestartTest(unittest.TestCase):
    def test_a_server_restart_is_followed_from_the_cursor(self) -> None:
        own = support.ServerProcess().start()
        self.addCleanup(own.cleanup)
        client = Client(own.url)
        self.addCleanup(client.close)
        pipeline, run = names()
        for i in range(10):
            client.append_log(pipeline, run, f"before {i}\n")
        stream = tail(pipeline, run, server=own.url, read_timeout=20, backoff=FAST, max_retries=10)
        self.addCleanup(stream.close)
        events: List[TailEvent] = []
        for event in stream:
            events.append(event)
            if len([e for e in events if e.type == "entry"]) == 11:  # the status, then 10 lines
                break
        # While the viewer holds its place: SIGTERM (which sends `end shutdown`), then the same
        # server again on the same port and data, where the run goes on and finishes.
        own.stop()
        own.start()
        client.close()
        for i in range(10):
            client.append_log(pipeline, run, f"after {i}\n")
        client.finish_run(pipeline, run, "success")
        events += list(stream)

        reconnects = [e for e in events if e.type == "reconnecting"]
        self.assertGreaterEqual(len(reconnects), 1)
        self.assertIn("shutdown", reconnects[0].reason)
        entries = [e.entry for e in events if e.type == "entry"]
        self.assertEqual([entry["seq"] for entry in entries], list(range(1, 23)))
        text = "".join(entry.get("text", "") for entry in entries)
        expected = "".join(f"before {i}\n" for i in range(10)) + "".join(f"after {i}\n" for i in range(10))
        self.assertEqual(text, expected)
        self.assertEqual(events[-1].type, "end")
        self.assertEqual(events[-1].end["reason"], "runFinished")


if __name__ == "__main__":
    unittest.main()
