"""Client against a real server: every call, its answer, and its errors."""

from __future__ import annotations

import os
import unittest
import uuid
from unittest import mock

import support
from tailwater import (
    BadRequest,
    Client,
    Conflict,
    ConnectionFailed,
    NotFound,
    TailwaterError,
)

server = support.ModuleServer("py.client")
setUpModule = server.start
tearDownModule = server.cleanup
names = server.names


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(server.url)
        self.addCleanup(self.client.close)

    def test_a_run_put_appended_to_and_finished_reads_back_exactly(self) -> None:
        pipeline, run = names()
        created = self.client.put_run(pipeline, run, "running", {"owner": "data-team"})
        self.assertEqual((created["pipeline"], created["runId"], created["status"]), (pipeline, run, "running"))
        self.assertEqual(created["meta"], {"owner": "data-team"})

        first = self.client.append_log(pipeline, run, "extracting 3 tables\n", step="extract")
        second = self.client.append_log(pipeline, run, "caf\u00e9 \U0001f600\r\nend\n")
        self.assertEqual((first["offset"], first["size"]), (0, 20))
        self.assertEqual(second["offset"], 20)
        self.assertEqual(second["size"], len("caf\u00e9 \U0001f600\r\nend\n".encode("utf-8")))
        events = self.client.append_events(
            pipeline, run, [{"kind": "progress", "data": {"pct": 40}}, {"kind": "metric", "data": [1, 2.5, None]}]
        )
        self.assertEqual(events["seqs"], [events["first"], events["first"] + 1])
        finished = self.client.finish_run(pipeline, run, "success")
        self.assertEqual(finished["status"], "success")

        entries = list(self.client.iter_entries(pipeline, run))
        self.assertEqual([entry["seq"] for entry in entries], list(range(1, len(entries) + 1)))
        kinds = [entry["kind"] for entry in entries]
        self.assertEqual(kinds, ["status", "log", "log", "progress", "metric", "status"])
        self.assertEqual(entries[1]["text"], "extracting 3 tables\n")
        self.assertEqual(entries[1]["step"], "extract")
        self.assertEqual(entries[3]["data"], {"pct": 40})
        self.assertEqual(entries[4]["data"], [1, 2.5, None])
        self.assertEqual(entries[5]["data"], {"status": "success"})
        self.assertEqual(self.client.read_log(pipeline, run), "extracting 3 tables\ncaf\u00e9 \U0001f600\r\nend\n")
        run_info = self.client.get_run(pipeline, "latest")
        self.assertEqual(
            (run_info["runId"], run_info["status"], run_info["logBytes"]),
            (run, "success", 20 + second["size"]),
        )
        self.assertEqual([r["runId"] for r in self.client.list_runs(pipeline)], [run])
        self.assertIn(pipeline, [p["fqn"] for p in self.client.list_pipelines()])

    def test_a_producer_id_sent_twice_is_stored_once(self) -> None:
        pipeline, run = names()
        log = self.client.append_log(pipeline, run, "once\n", id="line-1")
        again = self.client.append_log(pipeline, run, "once\n", id="line-1")
        self.assertEqual((again["seq"], again["duplicate"]), (log["seq"], True))
        batch = [{"kind": "progress", "data": {"n": 1}, "id": "ev-1"}]
        stored = self.client.append_events(pipeline, run, batch)
        repeated = self.client.append_events(pipeline, run, batch)
        self.assertEqual((repeated["seqs"], repeated["duplicates"]), (stored["seqs"], 1))
        # The run was created by the first append (its status entry), then one log, one event.
        kinds = [e["kind"] for e in self.client.iter_entries(pipeline, run)]
        self.assertEqual(kinds, ["status", "log", "progress"])

    def test_errors_carry_status_code_and_message(self) -> None:
        pipeline, run = names()
        with self.assertRaises(NotFound) as missing:
            self.client.get_run(pipeline, run)
        self.assertEqual((missing.exception.status, missing.exception.code), (404, "TW_RUN_NOT_FOUND"))
        self.assertIn(run, missing.exception.message)

        with self.assertRaises(BadRequest) as reserved:
            self.client.append_events(pipeline, run, [{"kind": "end", "data": {}}])
        self.assertEqual((reserved.exception.status, reserved.exception.code), (400, "TW_RESERVED_KIND"))
        self.assertFalse(reserved.exception.retryable)

        self.client.finish_run(pipeline, run, "failed")
        with self.assertRaises(Conflict) as conflict:
            self.client.put_run(pipeline, run, "running")
        self.assertEqual((conflict.exception.status, conflict.exception.code), (409, "TW_STATUS_CONFLICT"))

        self.client.append_log(pipeline, run, "a\n", id="same")
        with self.assertRaises(Conflict) as id_conflict:
            self.client.append_log(pipeline, run, "b\n", id="same")
        self.assertEqual(id_conflict.exception.code, "TW_ID_CONFLICT")

    def test_an_unreachable_server_is_status_0_and_retryable(self) -> None:
        client = Client(f"http://127.0.0.1:{support.free_port()}", timeout=5)
        with self.assertRaises(ConnectionFailed) as failed:
            client.get_run("p", "r")
        self.assertEqual((failed.exception.status, failed.exception.code), (0, None))
        self.assertTrue(failed.exception.retryable)
        self.assertFalse(client.ready())
        self.assertTrue(self.client.ready())

    def test_topics_take_events_and_list(self) -> None:
        topic = f"py-topic-{uuid.uuid4().hex[:8]}"
        answer = self.client.append_topic_events(topic, [{"kind": "commit", "data": {"n": i}} for i in range(3)])
        self.assertEqual(answer["seqs"], [1, 2, 3])
        page = self.client.topic_entries(topic)
        self.assertEqual([e["data"] for e in page["entries"]], [{"n": 0}, {"n": 1}, {"n": 2}])
        self.assertIn(topic, self.client.list_topics())
        with self.assertRaises(ValueError):
            self.client.append_topic_events("_runs", [{"kind": "x", "data": 1}])

    def test_names_with_slashes_and_spaces_are_one_path_segment(self) -> None:
        pipeline, run = "py/with slash ?#%", "scheduled__2026-08-10T00:00:00+00:00"
        self.client.append_log(pipeline, run, "ok\n")
        self.assertEqual(self.client.get_run(pipeline, run)["pipeline"], pipeline)

    def test_server_and_token_come_from_arguments_or_the_environment(self) -> None:
        url, seen = support.canned_server(
            self, 404, b'{"error":{"code":"TW_RUN_NOT_FOUND","message":"No run."}}'
        )

        with mock.patch.dict(os.environ, {"TAILWATER_SERVER": url + "/", "TAILWATER_TOKEN": "env-token"}):
            from_env = Client()
            self.assertEqual(from_env.server, url)
            with self.assertRaises(NotFound):
                from_env.get_run("etl.daily", "r1")
            with self.assertRaises(NotFound):
                Client(url, token="arg-token").get_run("etl.daily", "r1")
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(Client().server, "http://127.0.0.1:8585")
            with self.assertRaises(NotFound):
                Client(url).get_run("etl.daily", "r1")
        run_path = "/api/v1/pipelines/etl.daily/runs/r1"
        self.assertEqual(
            seen,
            [
                {"method": "GET", "path": run_path, "authorization": "Bearer env-token"},
                {"method": "GET", "path": run_path, "authorization": "Bearer arg-token"},
                {"method": "GET", "path": run_path, "authorization": ""},
            ],
        )
        with self.assertRaises(ValueError):
            Client("ftp://example.com")

    def test_a_non_tailwater_error_body_keeps_the_status(self) -> None:
        with self.assertRaises(TailwaterError) as caught:
            self.client._http.request("GET", "/no/such/route")
        self.assertEqual((caught.exception.status, caught.exception.code), (404, "TW_NOT_FOUND"))


class AuthenticatedServerTest(unittest.TestCase):
    """With authentication on, the token reaches the server as a Bearer token."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.secret = "s" * 40
        cls.server = support.ServerProcess({"TAILWATER_AUTH_SECRET": cls.secret}).start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.cleanup()

    def test_no_token_is_401_and_a_valid_token_writes(self) -> None:
        import subprocess

        minted = subprocess.run(
            [support.node_binary(), str(support.BIN), "token"]
            + ["--write", "pipeline:py.*", "--read", "pipeline:py.*"],
            env={**os.environ, "TAILWATER_AUTH_SECRET": self.secret},
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        from tailwater import Forbidden, Unauthenticated

        with self.assertRaises(Unauthenticated) as refused:
            Client(self.server.url, token="").append_log("py.auth", "r1", "no\n")
        self.assertEqual((refused.exception.status, refused.exception.code), (401, "TW_UNAUTHENTICATED"))
        client = Client(self.server.url, token=minted)
        client.append_log("py.auth", "r1", "yes\n")
        self.assertEqual(client.read_log("py.auth", "r1"), "yes\n")
        with self.assertRaises(Forbidden) as forbidden:
            client.append_log("other.auth", "r1", "no\n")
        self.assertEqual(forbidden.exception.code, "TW_FORBIDDEN")


if __name__ == "__main__":
    unittest.main()
