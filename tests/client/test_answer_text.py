"""The answer's text, for a conversation to send back as history: what the stream
delivered as answer content, thinking left out, and only when the caller asks."""

from __future__ import annotations

import json

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import END_COMPLETE, RawExchange
from zerohop.client.measure import build_record
from zerohop.core import records as rec
from zerohop.core.records import ClockAnchor, RequestRecord

pytestmark = pytest.mark.unit
MS = 1_000_000
ANCHOR = ClockAnchor(wall_ns=1_700_000_000 * 10**9, perf_ns=0)


def _chunk(delta: dict[str, str]) -> bytes:
    event = {"id": "x", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _record(answer: list[str] | None) -> RequestRecord:
    reads = [
        (10 * MS, _chunk({"reasoning_content": "let me think"})),
        (11 * MS, _chunk({"content": "Hello"})),
        (12 * MS, _chunk({"content": " world"}) + b"data: [DONE]\n\n"),
    ]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=13 * MS, end=END_COMPLETE)
    record = RequestRecord(request_id="r", workload="w", api="openai-chat", model="m")
    return build_record(record, ex, create_api_adapter("openai-chat"), ANCHOR, answer=answer)


def test_the_answer_text_is_the_answer_content_without_the_thinking() -> None:
    answer: list[str] = []
    record = _record(answer)
    assert record.outcome == rec.OK
    assert "".join(answer) == "Hello world"
    assert record.content_events == 3  # the thinking still times the first token


def test_no_list_no_text_kept() -> None:
    assert _record(None).outcome == rec.OK
