"""The SSE parser against the event-stream rules (no server needed)."""

from __future__ import annotations

import unittest
from typing import List

import support  # noqa: F401  (puts the package on sys.path)
from tailwater.sse import ServerSentEvent, SSEParser


def parse(*chunks: bytes) -> List[ServerSentEvent]:
    parser = SSEParser()
    events: List[ServerSentEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events


def byte_by_byte(body: bytes) -> List[ServerSentEvent]:
    return parse(*[body[i : i + 1] for i in range(len(body))])


class SSEParserTest(unittest.TestCase):
    def test_a_tailwater_frame_gives_kind_data_and_id(self) -> None:
        body = b'retry: 2000\n\nevent: log\ndata: {"seq":42}\nid: 42-9f3c01ab\n\n'
        parser = SSEParser()
        events = parser.feed(body)
        self.assertEqual(events, [ServerSentEvent("log", '{"seq":42}', "42-9f3c01ab")])
        self.assertEqual(parser.retry, 2000)
        self.assertEqual(parser.last_event_id, "42-9f3c01ab")

    def test_lf_cr_and_crlf_line_ends_read_the_same(self) -> None:
        expected = [ServerSentEvent("a", "1", "7"), ServerSentEvent("message", "2", "7")]
        for eol in (b"\n", b"\r", b"\r\n"):
            body = b"event: a" + eol + b"data: 1" + eol + b"id: 7" + eol + eol + b"data: 2" + eol + eol
            with self.subTest(eol=eol):
                self.assertEqual(parse(body), expected)
                self.assertEqual(byte_by_byte(body), expected)

    def test_a_crlf_split_across_reads_is_one_line_end(self) -> None:
        # Were the LF taken for a second line end, the empty line would dispatch "1" early and
        # the event would lose its second data line.
        self.assertEqual(parse(b"data: 1\r", b"\ndata: 2\r\n\r\n"), [ServerSentEvent("message", "1\n2", "")])

    def test_data_lines_are_joined_with_lf_and_a_trailing_empty_line_counts(self) -> None:
        self.assertEqual(parse(b"data: a\ndata:\ndata: b\ndata\n\n"), [ServerSentEvent("message", "a\n\nb\n", "")])

    def test_only_one_space_after_the_colon_is_dropped(self) -> None:
        self.assertEqual(parse(b"data:  two\ndata:none\n\n")[0].data, " two\nnone")

    def test_comments_are_skipped_and_counted(self) -> None:
        parser = SSEParser()
        events = parser.feed(b": heartbeat\n\n:\ndata: x\n: inside\n\n")
        self.assertEqual(events, [ServerSentEvent("message", "x", "")])
        self.assertEqual(parser.comments, 3)

    def test_a_block_without_data_dispatches_nothing_but_keeps_its_id(self) -> None:
        parser = SSEParser()
        self.assertEqual(parser.feed(b"event: cursor\nid: 9\n\n"), [])
        self.assertEqual(parser.last_event_id, "9")
        # The event type does not leak into the next event.
        self.assertEqual(parser.feed(b"data: y\n\n"), [ServerSentEvent("message", "y", "9")])

    def test_the_last_event_id_persists_and_an_id_with_nul_is_ignored(self) -> None:
        events = parse(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x003\ndata: c\n\nid\ndata: d\n\n")
        self.assertEqual([event.id for event in events], ["1", "1", "1", ""])

    def test_retry_takes_digits_only_and_unknown_fields_are_ignored(self) -> None:
        parser = SSEParser()
        parser.feed(b"retry: 150\nretry: 1x\nretry: -5\nfoo: bar\ndata: z\n\n")
        self.assertEqual(parser.retry, 150)

    def test_a_field_without_a_colon_has_an_empty_value(self) -> None:
        self.assertEqual(parse(b"data\ndata\n\n")[0].data, "\n")

    def test_a_leading_bom_is_dropped_once(self) -> None:
        events = parse(b"\xef\xbb", b"\xbfdata: 1\n\n")
        self.assertEqual(events, [ServerSentEvent("message", "1", "")])
        self.assertEqual(parse(b"\xef\xbb\xbf\xef\xbb\xbfdata: 1\n\n"), [])  # the second is a field name

    def test_multibyte_characters_split_across_reads_survive(self) -> None:
        body = 'data: caf\u00e9 \U0001f600 \U0001d11e\n\n'.encode("utf-8")
        self.assertEqual(byte_by_byte(body), [ServerSentEvent("message", "caf\u00e9 \U0001f600 \U0001d11e", "")])

    def test_an_event_the_stream_ends_inside_of_is_not_dispatched(self) -> None:
        self.assertEqual(parse(b"data: whole\n\ndata: cut off\n"), [ServerSentEvent("message", "whole", "")])

    def test_escaped_line_breaks_in_json_data_stay_text(self) -> None:
        # The server writes entries as one line of JSON: CR and LF in text are escaped.
        events = parse(b'event: log\ndata: {"text":"a\\r\\nb\\rc"}\nid: 3-00000000\n\n')
        self.assertEqual(events[0].data, '{"text":"a\\r\\nb\\rc"}')


if __name__ == "__main__":
    unittest.main()
