"""SSE parser: the WHATWG rules, any chunking, garbage, and the memory bound.

The property tests compare `SSEParser` with `_reference_events`, a line-by-line
transcription of the spec's "event stream interpretation" over a decoded string: slow
and obvious, so a disagreement points at the fast parser.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerohop.client.sse import SSEEvent, SSEOverflow, SSEParser

pytestmark = pytest.mark.unit

STREAMS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
FIXTURES = sorted(STREAMS_DIR.glob("*.sse"))


def parse_whole(data: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    return parser.feed(data)


def parse_chunks(chunks: list[bytes], **kwargs: int) -> list[SSEEvent]:
    parser = SSEParser(**kwargs)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events


def left_open(parser: SSEParser) -> list[SSEEvent]:
    """End of stream: the event it ended inside, if any (what a closing blank line would
    dispatch; the parser itself never dispatches an unterminated event)."""
    return parser.feed(b"\n\n")


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def _reference_events(data: bytes) -> list[SSEEvent]:
    """The spec, transcribed: decode, strip one BOM, split lines, apply fields."""
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\r":
            lines.append("".join(current))
            current = []
            if i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
        elif ch == "\n":
            lines.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    # `current` (an unterminated last line) is discarded: end of stream
    events: list[SSEEvent] = []
    data_buf, event_type, last_id = "", "", None
    for line in lines:
        if line == "":
            if data_buf == "":
                event_type = ""
                continue
            events.append(SSEEvent(data_buf[:-1], event_type or None, last_id))
            data_buf, event_type = "", ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "data":
            data_buf += value + "\n"
        elif name == "event":
            event_type = value
        elif name == "id" and "\0" not in value:
            last_id = value
    return events


# --- line endings -------------------------------------------------------------------
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_every_line_ending_gives_the_same_events(eol: bytes) -> None:
    body = eol.join([b"event: greet", b"data: hello", b"data: world", b"", b"data: 2", b"", b""])
    assert parse_whole(body) == [
        SSEEvent("hello\nworld", "greet"),
        SSEEvent("2", None),
    ]


def test_crlf_split_between_chunks_is_one_line_end_not_two() -> None:
    # if "\r" | "\n" counted as two line ends, the blank line would split the event in two
    assert parse_chunks([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [SSEEvent("a\nb", None)]


def test_lone_cr_at_chunk_end_followed_by_text_is_a_line_end() -> None:
    assert parse_chunks([b"data: a\r", b"\r", b"data: b\r\r"]) == [
        SSEEvent("a", None),
        SSEEvent("b", None),
    ]


def test_mixed_line_endings_in_one_stream() -> None:
    assert parse_whole(b"data: a\r\ndata: b\rdata: c\n\r\n") == [SSEEvent("a\nb\nc", None)]


# --- fields -------------------------------------------------------------------------
def test_comments_and_keepalives_are_ignored() -> None:
    body = b": hello\n\n:\ndata: x\n: inside an event\n\n: bye\n\n"
    assert parse_whole(body) == [SSEEvent("x", None)]


def test_only_one_space_after_the_colon_is_removed() -> None:
    assert parse_whole(b"data:  two\ndata:none\ndata: \n\n") == [SSEEvent(" two\nnone\n", None)]


def test_field_without_colon_has_an_empty_value() -> None:
    assert parse_whole(b"data\ndata\n\n") == [SSEEvent("\n", None)]
    assert parse_whole(b"data\n\n") == [SSEEvent("", None)]


def test_event_without_data_is_not_dispatched_and_its_type_does_not_leak() -> None:
    body = b"event: lonely\n\ndata: next\n\n"
    assert parse_whole(body) == [SSEEvent("next", None)]


def test_event_type_resets_after_each_dispatch() -> None:
    body = b"event: a\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n"
    assert parse_whole(body) == [SSEEvent("1", "a"), SSEEvent("2", None), SSEEvent("3", None)]


def test_id_persists_until_changed_and_nul_ids_are_ignored() -> None:
    parser = SSEParser()
    events = parser.feed(b"id: 7\ndata: a\n\ndata: b\n\nid: x\x00y\ndata: c\n\nid\ndata: d\n\n")
    assert [(e.data, e.id) for e in events] == [("a", "7"), ("b", "7"), ("c", "7"), ("d", "")]


def test_unknown_fields_are_ignored() -> None:
    assert parse_whole(b"foo: bar\nData: no\ndata: yes\n\n") == [SSEEvent("yes", None)]


def test_leading_bom_is_stripped_even_split_but_only_once() -> None:
    bom = b"\xef\xbb\xbf"
    expected = [SSEEvent("x", None)]
    assert parse_chunks([bom[:1], bom[1:2], bom[2:] + b"data: x\n\n"]) == expected
    # a second BOM is part of the first line: the field name is then not "data"
    assert parse_whole(bom + bom + b"data: x\n\n") == []


# --- bytes and UTF-8 ----------------------------------------------------------------
def test_utf8_character_split_across_chunks() -> None:
    body = "data: café 🙂\n\n".encode()
    cut = body.index("🙂".encode()) + 2
    assert parse_chunks([body[:cut], body[cut:]]) == [SSEEvent("café 🙂", None)]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert parse_whole(b"data: a\xffb\xe2\x82\n\n") == [SSEEvent("a\ufffdb\ufffd", None)]


def test_empty_chunks_change_nothing() -> None:
    assert parse_chunks([b"", b"data: a\r", b"", b"\n", b"", b"\n", b""]) == [SSEEvent("a", None)]


# --- end of stream ------------------------------------------------------------------
def test_unterminated_event_is_not_dispatched_and_is_left_open() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: done\n\ndata: cut") == [SSEEvent("done", None)]
    assert left_open(parser) == [SSEEvent("cut", None)]


def test_data_line_without_blank_line_is_left_open() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: [DONE]\n") == []
    assert left_open(parser) == [SSEEvent("[DONE]", None)]


def test_clean_end_leaves_nothing_open() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n\n") == [SSEEvent("a", None)]
    assert left_open(parser) == []


def test_an_event_left_open_keeps_its_type_and_lines() -> None:
    parser = SSEParser()
    parser.feed(b"data: a\n\nevent: e\ndata: [DONE]\ndata: tail")
    assert left_open(parser) == [SSEEvent("[DONE]\ntail", "e")]


# --- memory bound -------------------------------------------------------------------
def test_never_ending_line_overflows() -> None:
    parser = SSEParser(max_event_bytes=1000)
    with pytest.raises(SSEOverflow, match="max_event_bytes=1000"):
        for _ in range(200):
            parser.feed(b"data: xxxxxxxxxx")


def test_never_ending_event_of_many_lines_overflows() -> None:
    parser = SSEParser(max_event_bytes=1000)
    with pytest.raises(SSEOverflow):
        for _ in range(200):
            parser.feed(b"data: xxxxxxxxxx\n")


def test_empty_data_lines_count_towards_the_bound() -> None:
    parser = SSEParser(max_event_bytes=1000)
    with pytest.raises(SSEOverflow):
        for _ in range(100):
            parser.feed(b"data:\n" * 50)


def test_one_large_read_of_complete_events_is_not_an_overflow() -> None:
    parser = SSEParser(max_event_bytes=100)
    assert len(parser.feed(b"data: 0123456789\n\n" * 1000)) == 1000


def test_many_small_events_never_overflow() -> None:
    parser = SSEParser(max_event_bytes=64)
    total = 0
    for _ in range(1000):
        total += len(parser.feed(b"data: 0123456789012345678901234567890123456789\n\n"))
    assert total == 1000


def test_overflow_is_a_value_error_and_bad_limits_are_rejected() -> None:
    assert issubclass(SSEOverflow, ValueError)
    with pytest.raises(ValueError, match="max_event_bytes"):
        SSEParser(max_event_bytes=0)


# --- recorded streams: exhaustive simple splits -------------------------------------
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_one_byte_at_a_time_and_every_two_way_split(path: Path) -> None:
    data = path.read_bytes()
    whole = parse_whole(data)
    assert whole, "a recorded stream must contain events"
    assert whole == _reference_events(data)
    assert parse_chunks([data[i : i + 1] for i in range(len(data))]) == whole
    for cut in range(1, len(data)):
        assert parse_chunks([data[:cut], data[cut:]]) == whole, f"split at byte {cut}"


# --- properties ---------------------------------------------------------------------
_PIECES = [
    b"data",
    b"data: ",
    b"event",
    b"id",
    b"retry",
    b":",
    b" ",
    b"\r",
    b"\n",
    b"\r\n",
    b"x",
    b"42",
    b"\x00",
    "é🙂".encode(),
    b"\xff",
    b"\xf0\x9f",
    b"\xef\xbb\xbf",
]
sse_like = st.lists(st.sampled_from(_PIECES), max_size=60).map(b"".join)


@given(data=sse_like, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
@settings(max_examples=400, deadline=None)
def test_parser_matches_the_spec_reference_for_any_chunking(data: bytes, cuts: list[int]) -> None:
    expected = _reference_events(data)
    assert parse_whole(data) == expected
    assert parse_chunks(split_at(data, [c for c in cuts if c <= len(data)])) == expected


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
@settings(max_examples=40, deadline=None)
def test_fixture_any_chunking_equals_whole(path: Path, cuts: list[int]) -> None:
    data = path.read_bytes()
    assert parse_chunks(split_at(data, [c % (len(data) + 1) for c in cuts])) == parse_whole(data)


@given(data=st.binary(max_size=2000), cuts=st.lists(st.integers(0, 2000), max_size=8))
@settings(max_examples=300, deadline=None)
def test_parser_never_raises_on_garbage(data: bytes, cuts: list[int]) -> None:
    events = parse_chunks(split_at(data, [c for c in cuts if c <= len(data)]))
    assert all(isinstance(e.data, str) for e in events)
