"""What an agent loop needs of the client: each tool call's id, name and whole argument
text kept from the stream (in the decode step, after it ended), the answer's text
without the arguments, and tools and a tool-calling history on both chat APIs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from tests.client.test_stream_contract import STREAMS_DIR, sse_blocks
from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import END_COMPLETE, RawExchange
from zerohop.client.measure import build_record
from zerohop.client.protocols import GenerationRequest, StreamedToolCall
from zerohop.client.tool_messages import anthropic_messages, tool_input
from zerohop.core.records import ClockAnchor, RequestRecord

pytestmark = pytest.mark.unit

# the recorded tool-call streams (tests/fixtures/streams) and the calls they hold
RECORDED = {
    "openai_chat_tool_calls": [("call_Yb7", "get_weather", '{"city":"Paris"}')],
    "tgi_chat_tool_call": [("0", "get_weather", '{"city": "Paris"}')],  # id on every entry
    "vllm_chat_reasoning_tool_calls": [("chatcmpl-tool-5b1c", "get_weather", '{"city": "Paris"}'),
                                       ("chatcmpl-tool-77ad", "get_weather", '{"city": "Rome"}')],
    "anthropic_tool_use_first": [("toolu_01B", "lookup", '{"q": "x"}')],
    "anthropic_thinking_tool_use": [("toolu_01A09q90qw90", "get_weather", '{"city": "Paris"}')],
    "openai_chat": [],
    "anthropic_full": [],
}


def _replay(api: str, blocks: list[bytes], **collect: Any) -> RequestRecord:
    reads = [((i + 1) * 1_000_000, block) for i, block in enumerate(blocks)]
    exchange = RawExchange(sent_ns=0, status=200, headers={}, reads=reads,
                           end_ns=(len(reads) + 1) * 1_000_000, end=END_COMPLETE)
    record = RequestRecord(request_id="r1", workload="w", api=api, model="m")
    return build_record(record, exchange, create_api_adapter(api), ClockAnchor(0, 0), **collect)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_calls_of_recorded_streams_come_back_exactly(name: str) -> None:
    api = json.loads((STREAMS_DIR / f"{name}.json").read_text())["api"]
    blocks = sse_blocks((STREAMS_DIR / f"{name}.sse").read_bytes())
    calls: list[StreamedToolCall] = []
    answer: list[str] = []
    record = _replay(api, blocks, tool_calls=calls, answer=answer)
    assert [(c.call_id, c.name, c.arguments) for c in calls] == RECORDED[name]
    assert record.tool_calls == len(calls)
    if calls:
        assert answer == []  # the arguments are no answer text
    # collecting changes nothing the record says
    plain = _replay(api, blocks)
    assert dataclasses.asdict(plain) == dataclasses.asdict(record)


def _chunk(delta: dict[str, Any], index: int = 0) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": index, "delta": delta}]}).encode() \
        + b"\n\n"


def test_text_beside_calls_in_one_chunk_and_parallel_calls_keep_apart() -> None:
    def entry(i: int, arguments: str, **opening: str) -> dict[str, Any]:
        return {"index": i, **({"id": opening["id"], "type": "function"} if opening else {}),
                "function": {**({"name": opening["name"]} if opening else {}),
                             "arguments": arguments}}

    blocks = [
        _chunk({"role": "assistant", "content": "Let me look."}),
        _chunk({"content": " Both.", "tool_calls": [entry(0, "", id="a", name="f"),
                                                    entry(1, '{"k":', id="b", name="g")]}),
        _chunk({"tool_calls": [entry(0, '{"x": "\\u00e9\\n'), entry(1, ' 1}')]}),
        _chunk({"tool_calls": [entry(0, '"}')]}),
        b"data: [DONE]\n\n",
    ]
    calls: list[StreamedToolCall] = []
    answer: list[str] = []
    record = _replay("openai-chat", blocks, tool_calls=calls, answer=answer)
    assert record.outcome == "ok" and record.tool_calls == 2
    assert "".join(answer) == "Let me look. Both."
    assert calls == [StreamedToolCall("a", "f", '{"x": "\\u00e9\\n"}'),  # as streamed
                     StreamedToolCall("b", "g", '{"k": 1}')]


def test_a_cut_stream_keeps_the_arguments_as_far_as_they_came() -> None:
    blocks = [_chunk({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                      "function": {"name": "f", "arguments": '{"a": "b'}}]})]
    calls: list[StreamedToolCall] = []
    record = _replay("openai-chat", blocks, tool_calls=calls)
    assert record.outcome == "incomplete_stream"
    assert calls == [StreamedToolCall("c", "f", '{"a": "b')]


# --- the requests ---------------------------------------------------------------------
TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look it up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "now"}}]
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": "Looking.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "lookup", "arguments": '{"q": "a \\"b\\""}'}},
        {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": ""}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "found"},
    {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_3", "type": "function",
         "function": {"name": "lookup", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_3", "content": "none"},
]


def _body(api: str, **fields: Any) -> dict[str, Any]:
    request = GenerationRequest(model="m", max_tokens=8, messages=HISTORY, **fields)
    return json.loads(create_api_adapter(api).build_request(request, api_key=None,
                                                         request_id="r").body)


def test_openai_chat_sends_tools_and_history_as_they_are() -> None:
    body = _body("openai-chat", tools=TOOLS, tool_choice="required")
    assert body["tools"] == TOOLS and body["tool_choice"] == "required"
    assert body["messages"] == HISTORY
    assert "tools" not in _body("openai-chat") and "tool_choice" not in _body("openai-chat")


def test_anthropic_gets_tool_use_and_tool_result_blocks() -> None:
    body = _body("anthropic", tools=TOOLS, tool_choice="none")
    assert body["system"] == "Be brief."
    assert body["tools"] == [
        {"name": "lookup", "description": "Look it up.",
         "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
        {"name": "now", "input_schema": {"type": "object", "properties": {}}}]
    assert body["tool_choice"] == {"type": "none"}
    assert body["messages"] == [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": 'a "b"'}},
            {"type": "tool_use", "id": "call_2", "name": "now", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "found"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "noon"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_3", "name": "lookup", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_3", "content": "none"}]},
    ]
    assert _body("anthropic", tool_choice="auto")["tool_choice"] == {"type": "auto"}
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert anthropic_messages(plain) == plain


def test_arguments_that_are_no_object_are_refused_for_anthropic() -> None:
    assert tool_input("") == {} and tool_input(' {"a": [1]} ') == {"a": [1]}
    for bad in ('{"a": ', "[1]", "null"):
        with pytest.raises(ValueError, match="arguments are not"):
            tool_input(bad)


def test_completions_has_no_tools() -> None:
    request = GenerationRequest(model="m", max_tokens=8, prompt="p", tools=TOOLS)
    with pytest.raises(ValueError, match="openai-completions has no tools"):
        create_api_adapter("openai-completions").build_request(request, api_key=None,
                                                           request_id="r")
