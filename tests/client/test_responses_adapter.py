"""The OpenAI Responses adapter beyond its golden streams: the request it builds from a
chat-shaped agent history, and the terminal events that end a stream badly."""

from __future__ import annotations

import json

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.protocols import (
    ContentDelta,
    GenerationRequest,
    StreamError,
    Terminator,
    ToolCallPart,
    Usage,
)
from zerohop.client.sse import SSEEvent
from zerohop.sim.answers.responses_shape import responses_messages
from zerohop.sim.answers.tokens import count_chat_tokens

pytestmark = pytest.mark.unit

TOOL = {"type": "function", "function": {"name": "search", "description": "look up",
                                         "parameters": {"type": "object", "properties": {
                                             "query": {"type": "string"}}}}}
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Find it."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "search", "arguments": '{"query":"a"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "search", "arguments": '{"query":"b"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "found a"},
    {"role": "tool", "tool_call_id": "call_2", "content": "found b"},
]


def build(**fields: object) -> dict[str, object]:
    req = GenerationRequest(model="m", max_tokens=32, **fields)
    adapter = create_api_adapter("openai-responses")
    request = adapter.build_request(req, api_key="sk-x", request_id="r1")
    assert (request.method, request.path) == ("POST", "/v1/responses")
    assert request.headers["authorization"] == "Bearer sk-x"
    body = json.loads(request.body)
    assert isinstance(body, dict)
    return body


def test_an_agent_history_becomes_responses_items() -> None:
    body = build(messages=HISTORY, tools=[TOOL], tool_choice="auto", ignore_eos=True)
    assert body["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Find it."},
        {"type": "function_call", "call_id": "call_1", "name": "search",
         "arguments": '{"query":"a"}'},
        {"type": "function_call", "call_id": "call_2", "name": "search",
         "arguments": '{"query":"b"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "found a"},
        {"type": "function_call_output", "call_id": "call_2", "output": "found b"},
    ]
    assert body["tools"] == [{"type": "function", "name": "search", "description": "look up",
                              "parameters": TOOL["function"]["parameters"]}]  # type: ignore[index]
    assert (body["max_output_tokens"], body["stream"], body["store"]) == (32, True, False)
    assert (body["tool_choice"], body["ignore_eos"]) == ("auto", True)
    assert "max_tokens" not in body and "messages" not in body


def test_the_embedded_target_counts_a_responses_history_as_the_chat_one() -> None:
    body = build(messages=HISTORY)
    assert count_chat_tokens(responses_messages(body)) == count_chat_tokens(HISTORY)


def test_token_ids_and_stop_sequences_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^prompt:"):
        build(prompt_token_ids=[1, 2])
    with pytest.raises(ValueError, match=r"^stop:"):
        build(prompt="hi", stop=["\n"])


def terminal(kind: str, **response: object) -> list[object]:
    data = json.dumps({"type": kind, "sequence_number": 9, "response": {
        "id": "resp_1", "status": kind.split(".")[1], **response}})
    decoder = create_api_adapter("openai-responses").new_stream_decoder()
    return list(decoder.decode_event(SSEEvent(data, kind)))


def test_an_incomplete_response_is_ok_only_when_cut_by_max_output_tokens() -> None:
    usage = {"input_tokens": 5, "output_tokens": 2}
    cut = terminal("response.incomplete", usage=usage,
                   incomplete_details={"reason": "max_output_tokens"})
    assert cut == [Usage(5, 2), Terminator()]
    filtered = terminal("response.incomplete", usage=usage,
                        incomplete_details={"reason": "content_filter"})
    assert filtered[0] == Usage(5, 2)
    assert isinstance(filtered[1], StreamError)
    assert filtered[1].error_type == "incomplete_content_filter"
    assert terminal("response.failed", error=None) == [
        StreamError("response_failed", "the response failed")]


def test_an_error_event_and_a_call_opening_with_its_parts() -> None:
    adapter = create_api_adapter("openai-responses")
    error = json.dumps({"type": "error", "code": "rate_limit_exceeded", "message": "slow down",
                        "param": None, "sequence_number": 3})
    assert adapter.decode_event(SSEEvent(error, "error")) == [
        StreamError("rate_limit_exceeded", "slow down")]
    added = json.dumps({"type": "response.output_item.added", "output_index": 1,
                        "item": {"type": "function_call", "call_id": "call_9", "name": "search",
                                 "arguments": ""}, "sequence_number": 4})
    items = adapter.new_stream_decoder(tool_call_parts=True).decode_event(SSEEvent(added, None))
    assert ToolCallPart("1", "call_9", "search") in items


def test_a_non_streamed_response_reads_its_output_items() -> None:
    body = json.dumps({"id": "resp_1", "output": [
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "hmm "}]},
        {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}],
        "usage": {"input_tokens": 3, "output_tokens": 4,
                  "output_tokens_details": {"reasoning_tokens": 1}}}).encode()
    decoded = create_api_adapter("openai-responses").decode_response(body)
    assert (decoded.text, decoded.tool_calls) == ("hmm Hi", 1)
    assert decoded.usage == Usage(3, 4, 1, None)


def test_per_token_logprobs_say_how_many_tokens_a_delta_holds() -> None:
    adapter = create_api_adapter("openai-responses")
    delta = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0,
             "content_index": 0, "delta": " big word", "sequence_number": 5}
    counted = adapter.decode_event(SSEEvent(json.dumps({**delta, "logprobs": [
        {"token": " big", "logprob": -0.1}, {"token": " word", "logprob": -0.2}]}), None))
    assert counted == [ContentDelta(" big word", 2)]
    silent = adapter.decode_event(SSEEvent(json.dumps({**delta, "logprobs": []}), None))
    assert silent == [ContentDelta(" big word", None)]
