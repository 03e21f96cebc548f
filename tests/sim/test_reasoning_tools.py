"""Against a sim playing a reasoning, tool-calling model (`--reasoning-share 1
--tool-call-probability 1`): zerohop's own client measures TTFO after the thinking, the
reasoning tokens the sim reports and the tool call it makes; the official openai and
anthropic SDKs read the same streams and bodies without error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import Timeouts
from zerohop.client.llm_client import LLMClient, RequestSpec
from zerohop.client.protocols import GenerationRequest
from zerohop.core.records import ClockAnchor, RequestRecord
from zerohop.sim.launcher import SimProcess, start_sim

from .conftest import MODEL
from .wire import request

pytestmark = pytest.mark.integration

REASONING_TOKENS = 6  # the median thinking length the sim is started with
OPENAI_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather in a city",
                    "input_schema": {"type": "object",
                                     "properties": {"city": {"type": "string"}}}}]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def thinking_sim() -> Iterator[SimProcess]:
    args = ["--seed", "5", "--reasoning-share", "1", "--reasoning-tokens",
            str(REASONING_TOKENS), "--tool-call-probability", "1"]
    with start_sim(args) as sim:
        yield sim


def measure(sim: SimProcess, api: str, count: int, **extra: Any) -> list[RequestRecord]:
    """`count` requests through zerohop's client, as a load test sends them."""
    client = LLMClient(sim.url, create_api_adapter(api), api_key=None, timeouts=Timeouts(),
                       anchor=ClockAnchor.now())
    try:
        generation = GenerationRequest(model=MODEL, max_tokens=40, messages=MESSAGES, **extra)
        return [client.execute(RequestSpec(workload="w", generation=generation))
                for _ in range(count)]
    finally:
        client.close()


def ground_truth(sim: SimProcess, request_id: str) -> dict[str, Any]:
    record = request(sim.url, f"/zerohop/ground_truth?request_id={request_id}").json()
    assert isinstance(record, dict)
    return record


@pytest.mark.parametrize("api", ["openai-chat", "anthropic", "openai-responses"])
def test_the_first_output_token_comes_after_the_thinking(
    thinking_sim: SimProcess, api: str
) -> None:
    records = measure(thinking_sim, api, 6, ignore_eos=True)
    for record in records:
        truth = ground_truth(thinking_sim, record.request_id)
        assert record.outcome == "ok" and record.output_tokens == 40
        assert record.ttft_ms is not None and record.ttfo_ms is not None
        assert record.ttfo_ms > record.ttft_ms
        assert record.reasoning_tokens == truth["reasoning_tokens"] >= 1
        assert record.tool_calls == 0 == truth["tool_calls"]
    # OpenAI's usage says the count; Anthropic's does not, so it is counted off the stream
    assert len({r.reasoning_tokens for r in records}) > 1  # the length is drawn per request


@pytest.mark.parametrize("api", ["openai-chat", "anthropic", "openai-responses"])
def test_a_request_offering_tools_is_answered_with_one_call(
    thinking_sim: SimProcess, api: str
) -> None:
    offered: dict[str, Any] = (
        {"tools": OPENAI_TOOLS} if api == "openai-responses"  # the adapter flattens them
        else {"extra_body": {"tools": OPENAI_TOOLS if api == "openai-chat" else ANTHROPIC_TOOLS}})
    (record,) = measure(thinking_sim, api, 1, **offered)
    truth = ground_truth(thinking_sim, record.request_id)
    assert record.outcome == "ok" and record.tool_calls == 1 == truth["tool_calls"]
    assert record.ttfo_ms is not None and record.ttft_ms is not None
    assert record.ttfo_ms > record.ttft_ms  # the arguments are the answer
    assert record.output_tokens == truth["completion_tokens"]
    assert truth["completion_tokens"] == truth["reasoning_tokens"] + 12  # argument_tokens


def oai(sim: SimProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.url + "/v1", api_key="not-used", max_retries=0)


def claude(sim: SimProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.url, api_key="not-used", max_retries=0)


def test_the_openai_sdk_reads_reasoning_and_tool_call_streams(thinking_sim: SimProcess) -> None:
    stream = oai(thinking_sim).chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=100, tools=OPENAI_TOOLS,
        stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thinking = [getattr(d, "reasoning_content", None) for d in deltas]
    assert sum(1 for t in thinking if t) >= 1
    calls = [call for d in deltas for call in d.tool_calls or []]
    assert calls[0].id and calls[0].type == "function"
    assert calls[0].function is not None and calls[0].function.name == "get_weather"
    arguments = "".join(c.function.arguments or "" for c in calls if c.function)
    assert set(json.loads(arguments)) == {"city"}
    finish = [c.choices[0].finish_reason for c in chunks
              if c.choices and c.choices[0].finish_reason]
    assert finish == ["tool_calls"]
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == sum(1 for t in thinking if t)


def test_the_openai_sdk_reads_a_responses_reasoning_and_tool_call_stream(
        thinking_sim: SimProcess) -> None:
    tool = {"type": "function", **OPENAI_TOOLS[0]["function"]}  # type: ignore[dict-item]
    events = list(oai(thinking_sim).responses.create(
        model=MODEL, input=MESSAGES, max_output_tokens=100, tools=[tool], stream=True))  # type: ignore[arg-type]
    kinds = [e.type for e in events]
    thinking = [e.delta for e in events if e.type == "response.reasoning_text.delta"]
    fragments = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert thinking and fragments and kinds[-1] == "response.completed"
    assert kinds.index("response.reasoning_text.done") < kinds.index(
        "response.function_call_arguments.delta")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    reasoning, call = final.output
    assert reasoning.type == "reasoning" and call.type == "function_call"
    assert call.name == "get_weather" and call.arguments == "".join(fragments)
    assert set(json.loads(call.arguments)) == {"city"}
    assert final.usage is not None
    assert final.usage.output_tokens_details.reasoning_tokens == len(thinking)
    assert final.usage.output_tokens == len(thinking) + len(fragments)


def test_the_openai_sdk_reads_a_reasoning_tool_call_body(thinking_sim: SimProcess) -> None:
    reply = oai(thinking_sim).chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=100, tools=OPENAI_TOOLS,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert set(json.loads(call.function.arguments)) == {"city"}
    assert getattr(choice.message, "reasoning_content", None)
    assert reply.usage is not None and reply.usage.completion_tokens_details is not None
    assert reply.usage.completion_tokens_details.reasoning_tokens


def test_the_anthropic_sdk_reads_thinking_and_tool_use_streams(thinking_sim: SimProcess) -> None:
    with claude(thinking_sim).messages.stream(
        model=MODEL, max_tokens=100, messages=MESSAGES, tools=ANTHROPIC_TOOLS,
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert "thinking" in kinds and "signature" in kinds and "input_json" in kinds
    assert [block.type for block in final.content] == ["thinking", "tool_use"]
    thinking, call = final.content
    assert thinking.type == "thinking" and thinking.thinking and thinking.signature
    assert call.type == "tool_use" and call.name == "get_weather"
    assert isinstance(call.input, dict) and set(call.input) == {"city"}
    assert final.stop_reason == "tool_use"


def test_the_anthropic_sdk_reads_a_thinking_text_body(thinking_sim: SimProcess) -> None:
    message = claude(thinking_sim).messages.create(
        model=MODEL, max_tokens=30, messages=MESSAGES,
        extra_body={"ignore_eos": True},
    )
    assert [block.type for block in message.content] == ["thinking", "text"]
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 30
