"""`cached_tokens`: what the server's prefix cache served, from usage into the record
(OpenAI's `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`).
The usage events are the embedded target's own bytes, so client and sim agree on them."""

from __future__ import annotations

import json

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import END_COMPLETE, RawExchange
from zerohop.client.measure import build_record
from zerohop.core import records as rec
from zerohop.core.records import ClockAnchor, RequestRecord
from zerohop.sim.answers.api_shapes import ChatShape, CompletionShape, MessagesShape

pytestmark = pytest.mark.unit
MS = 1_000_000
ANCHOR = ClockAnchor(wall_ns=1_700_000_000 * 10**9, perf_ns=0)


def record_of(api: str, stream: bytes) -> RequestRecord:
    reads = [(10 * MS, stream)]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=11 * MS, end=END_COMPLETE)
    record = RequestRecord(request_id="r", workload="w", api=api, model="m")
    return build_record(record, ex, create_api_adapter(api), ANCHOR)


def openai_content(api: str, text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}} if api == "openai-chat" else {
        "index": 0, "text": text}
    return b"data: " + json.dumps({"id": "x", "choices": [choice]}).encode() + b"\n\n"


def openai_stream(shape: ChatShape | CompletionShape, cached: int | None) -> bytes:
    api = "openai-chat" if isinstance(shape, ChatShape) else "openai-completions"
    return (openai_content(api, " a") + openai_content(api, " b")
            + shape.tail_events(2048, 2, "length", True, cached))


def anthropic_text(text: str) -> bytes:
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": text}}
    return b"event: content_block_delta\ndata: " + json.dumps(delta).encode() + b"\n\n"


@pytest.mark.parametrize(("api", "shape"), [
    ("openai-chat", ChatShape("r", "m", 1, include_usage=True)),
    ("openai-completions", CompletionShape("r", "m", 1, include_usage=True)),
])
def test_openai_cached_tokens_land_in_the_record(
    api: str, shape: ChatShape | CompletionShape
) -> None:
    r = record_of(api, openai_stream(shape, 1024))
    assert r.outcome == rec.OK and r.input_tokens == 2048 and r.cached_tokens == 1024
    assert record_of(api, openai_stream(shape, 0)).cached_tokens == 0  # a miss is 0, not None


def test_openai_usage_without_details_leaves_cached_tokens_unknown() -> None:
    shape = ChatShape("r", "m", 1, include_usage=True)
    assert record_of("openai-chat", openai_stream(shape, None)).cached_tokens is None
    usage = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10,
             "prompt_tokens_details": None}  # vLLM without --enable-prompt-tokens-details
    stream = (openai_content("openai-chat", " a")
              + b'data: {"id":"x","choices":[],"usage":' + json.dumps(usage).encode()
              + b"}\n\ndata: [DONE]\n\n")
    r = record_of("openai-chat", stream)
    assert r.outcome == rec.OK and r.input_tokens == 9 and r.cached_tokens is None


def test_anthropic_cache_reads_from_message_start_and_message_delta() -> None:
    shape = MessagesShape("r", "claude", prompt_tokens=600, cached_tokens=512)
    body = anthropic_text(" a") + anthropic_text(" b")
    at_start_only = shape.head_events() + body + shape.tail_events(600, 2, "length", True)
    r = record_of("anthropic", at_start_only)
    assert r.outcome == rec.OK and r.input_tokens == 600 and r.cached_tokens == 512
    corrected = shape.head_events() + body + shape.tail_events(600, 2, "length", True, 528)
    assert record_of("anthropic", corrected).cached_tokens == 528  # the latest report wins


def test_non_streamed_usage_decodes_cached_tokens() -> None:
    chat = ChatShape("r", "m", 1, include_usage=False).final_body(" a", 40, 1, "stop", 32)
    assert create_api_adapter("openai-chat").decode_response(chat).usage.cached_tokens == 32
    message = MessagesShape("r", "c", 40).final_body(" a", 40, 1, "stop", 16)
    assert create_api_adapter("anthropic").decode_response(message).usage.cached_tokens == 16
