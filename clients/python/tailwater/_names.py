"""Local checks of names and kinds, so a mistake throws at the call rather than costing a
round trip and a dropped batch. The rules are those of docs/API.md, "Names"."""

from __future__ import annotations

import re

RESERVED_KINDS = frozenset({"end", "gap", "error", "cursor", "status", "system", "connected"})
LOG_KIND = "log"

_KIND_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_TOPIC_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_CONTROL_RE = re.compile("[\u0000-\u001f\u007f-\u009f]")
_BIDI_RE = re.compile("[\u202a-\u202e\u2066-\u2069]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def check_label(what: str, value: str) -> str:
    """A step, correlation id or producer id: 1–256 bytes of UTF-8, no controls, no bidi."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str (was {type(value).__name__}).")
    if _SURROGATE_RE.search(value):
        raise ValueError(f"{what} is not valid Unicode text (a lone surrogate).")
    size = len(value.encode("utf-8"))
    if size < 1 or size > 256:
        raise ValueError(f"{what} must be 1–256 bytes of UTF-8 (was {size}).")
    if _CONTROL_RE.search(value):
        raise ValueError(f"{what} must not contain control characters (line breaks included).")
    if _BIDI_RE.search(value):
        raise ValueError(f"{what} must not contain bidirectional override characters.")
    return value


def check_event_kind(kind: str) -> str:
    """A kind a producer may send as an event: well formed, not reserved, not ``log``."""
    if not isinstance(kind, str) or not _KIND_RE.fullmatch(kind):
        raise ValueError(f"Kind must match [A-Za-z0-9_.:-]{{1,64}} (was {kind!r}).")
    if kind in RESERVED_KINDS:
        raise ValueError(f'Kind "{kind}" is reserved for the server.')
    if kind == LOG_KIND:
        raise ValueError('Kind "log" is log text: send it with log(), which keeps byte offsets.')
    return kind


def check_topic(topic: str, write: bool = False) -> str:
    """A topic: ``[A-Za-z0-9_.-]{1,128}``; one starting with ``_`` is the server's own
    (``_runs``) and may be read but not written."""
    if not isinstance(topic, str) or not _TOPIC_RE.fullmatch(topic):
        raise ValueError(f"Topic must match [A-Za-z0-9_.-]{{1,128}} (was {topic!r}).")
    if write and topic.startswith("_"):
        raise ValueError(f"Topic {topic!r} is the server's own and cannot be written.")
    return topic


def scrub_surrogates(text: str) -> str:
    """Replaces lone surrogates (which UTF-8 cannot carry) with U+FFFD, as a decoder would."""
    return _SURROGATE_RE.sub("\ufffd", text)
