"""The embedded target playing a reasoning and a tool-calling model: what an answer will
hold (answer_plan.py), its bytes (answer_shapes.py) as zerohop's own decoders read them,
and the flags that turn it on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.protocols import ContentDelta, StreamItem, ToolCall, Usage
from zerohop.client.sse import SSEParser
from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.sim.answers.answer_plan import (
    PLAIN_ANSWER,
    AnswerPlan,
    ToolCallPlan,
    draw_answer_plan,
    offered_tools,
    tool_choice,
)
from zerohop.sim.answers.answer_shapes import (
    PlannedChatShape,
    PlannedMessagesShape,
    chat_shape,
    messages_shape,
)
from zerohop.sim.answers.api_shapes import ChatShape, MessagesShape, WireShape
from zerohop.sim.answers.tokens import WORD_PIECE_BYTES, generated_text
from zerohop.sim.config import ConfigError, ReasoningConfig, ToolCallConfig, load_config
from zerohop.sim.sim_command import sim_command

pytestmark = pytest.mark.unit

OPENAI_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {}}}}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "input_schema": {"properties": {"city": {}}}}]
NO_TOOLS = ToolCallConfig()
NO_REASONING = ReasoningConfig()


def plan(api: str, body: dict[str, Any], *, share: float = 0.0, probability: float = 0.0,
         request_id: str = "r1", tokens: int = 8, sigma: float = 0.0) -> AnswerPlan:
    return draw_answer_plan(
        api, body, reasoning=ReasoningConfig(share=share, tokens=tokens, sigma=sigma),
        tool_calls=ToolCallConfig(probability=probability, argument_tokens=5),
        seed=3, request_id=request_id, word_offset=0,
    )


# --- the plan ------------------------------------------------------------------------
def test_nothing_is_planned_by_default_or_for_completions() -> None:
    assert plan("chat", {"tools": OPENAI_TOOLS}) is PLAIN_ANSWER
    assert plan("completions", {}, share=1.0) is PLAIN_ANSWER


def test_the_reasoning_share_is_the_share_of_requests_that_think() -> None:
    plans = [plan("chat", {}, share=0.3, request_id=f"r{i}") for i in range(2000)]
    thinking = [p.reasoning for p in plans if p.reasoning]
    assert 0.26 < len(thinking) / len(plans) < 0.34
    assert set(thinking) == {8}  # sigma 0: always the median
    spread = {plan("chat", {}, share=1.0, sigma=0.5, request_id=f"r{i}").reasoning
              for i in range(200)}
    assert len(spread) > 10 and min(spread) >= 1


def test_the_plan_is_the_same_for_the_same_request_id() -> None:
    a = plan("messages", {"tools": ANTHROPIC_TOOLS}, share=0.5, probability=0.5, sigma=0.5)
    b = plan("messages", {"tools": ANTHROPIC_TOOLS}, share=0.5, probability=0.5, sigma=0.5)
    assert a == b


def test_tool_calls_need_tools_and_honour_tool_choice() -> None:
    assert plan("chat", {}, probability=1.0) is PLAIN_ANSWER
    called = plan("chat", {"tools": OPENAI_TOOLS}, probability=1.0)
    assert called.tool == ToolCallPlan("get_weather", "city", 5)
    assert plan("messages", {"tools": ANTHROPIC_TOOLS}, probability=1.0).tool == called.tool
    assert plan("chat", {"tools": OPENAI_TOOLS, "tool_choice": "none"},
                probability=1.0) is PLAIN_ANSWER
    assert plan("chat", {"tools": OPENAI_TOOLS, "tool_choice": "required"}).tool is not None
    assert plan("messages", {"tools": ANTHROPIC_TOOLS, "tool_choice": {"type": "any"}}).tool
    two = [*OPENAI_TOOLS, {"type": "function", "function": {"name": "lookup"}}]
    named = {"type": "function", "function": {"name": "lookup"}}
    forced = plan("chat", {"tools": two, "tool_choice": named})
    assert forced.tool == ToolCallPlan("lookup", "query", 5)


def test_tool_shapes_it_cannot_read_are_skipped() -> None:
    body = {"tools": ["x", {"type": "function"}, {"function": {"name": ""}}, *OPENAI_TOOLS]}
    assert offered_tools("chat", body) == [("get_weather", "city")]
    assert offered_tools("chat", {"tools": "all"}) == []
    assert tool_choice("chat", {"tool_choice": 7}) == ("auto", None)
    assert tool_choice("messages", {"tool_choice": {"type": "tool", "name": "f"}}) == (
        "required", "f")


@pytest.mark.parametrize(
    ("answer", "drawn", "ignore_eos", "expected"),
    [
        (PLAIN_ANSWER, 40, False, 40),
        (AnswerPlan(reasoning=30), 40, False, 70),  # thinking adds decode steps
        (AnswerPlan(reasoning=90), 40, False, 100),  # max_tokens caps both together
        (AnswerPlan(reasoning=30, tool=ToolCallPlan("f", "q", 5)), 40, False, 35),
        (AnswerPlan(reasoning=30, tool=ToolCallPlan("f", "q", 5)), 100, True, 100),
        (AnswerPlan(tool=ToolCallPlan("f", "q", 2)), 40, False, 10),  # min_tokens
    ],
)
def test_output_length(answer: AnswerPlan, drawn: int, ignore_eos: bool, expected: int) -> None:
    assert answer.output_tokens(drawn, max_tokens=100, ignore_eos=ignore_eos,
                                min_tokens=10) == expected


# --- the bytes, as zerohop's decoders read them --------------------------------------
def stream(shape: WireShape, completion: int, reason: str) -> bytes:
    pieces = [WORD_PIECE_BYTES[i % len(WORD_PIECE_BYTES)] for i in range(completion)]
    out = shape.head_events() + shape.first_events()
    out += b"".join(shape.token_event(i, p) for i, p in enumerate(pieces[:-1]))
    out += shape.last_token_event(completion - 1, pieces[-1], reason)
    return out + shape.tail_events(20, completion, reason, True)


def decode(api: str, raw: bytes) -> list[StreamItem]:
    parser, decoder = SSEParser(), create_api_adapter(api).new_stream_decoder()
    return [item for event in parser.feed(raw) for item in decoder.decode_event(event)]


def finish_reasons(raw: bytes) -> list[str]:
    return [
        choice["finish_reason"]
        for line in raw.decode().split("\n")
        if line.startswith("data: {")
        for choice in json.loads(line[6:]).get("choices", [])
        if choice.get("finish_reason")
    ]


TOOL = ToolCallPlan("get_weather", "city", 3)


def thinking_then_tool_call(api: str, shape: WireShape) -> tuple[bytes, list[StreamItem]]:
    """Streams 2 thinking tokens then TOOL's 3 argument tokens, and checks what every API
    decodes the same way: which deltas are reasoning, and the call's arguments."""
    raw = stream(shape, 5, "stop")
    items = decode(api, raw)
    content = [i for i in items if isinstance(i, ContentDelta)]
    assert [c.reasoning for c in content] == [True, True, False, False, False]
    assert json.loads("".join(c.text for c in content[2:])) == {"city": generated_text(2, 3)}
    return raw, items


def test_chat_thinking_then_a_tool_call() -> None:
    shape = PlannedChatShape("r1", "m", 1, True, AnswerPlan(2, TOOL))
    raw, items = thinking_then_tool_call("openai-chat", shape)
    assert items.count(ToolCall("0:0")) == 1 and items[2] == ToolCall("0:0")
    assert items[-2] == Usage(20, 5, 2)
    assert finish_reasons(raw) == ["tool_calls"]


def test_chat_cut_short_in_the_thinking_makes_no_call() -> None:
    raw = stream(PlannedChatShape("r1", "m", 1, True, AnswerPlan(4, TOOL)), 3, "length")
    items = decode("openai-chat", raw)
    assert all(i.reasoning for i in items if isinstance(i, ContentDelta))
    assert not any(isinstance(i, ToolCall) for i in items)
    assert finish_reasons(raw) == ["length"]
    assert items[-2] == Usage(20, 3, 3)


def test_chat_thinking_then_text() -> None:
    raw = stream(PlannedChatShape("r1", "m", 1, True, AnswerPlan(reasoning=1)), 3, "stop")
    content = [i for i in decode("openai-chat", raw) if isinstance(i, ContentDelta)]
    assert [c.reasoning for c in content] == [True, False, False]
    assert finish_reasons(raw) == ["stop"]


def message_events(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: ")]


def test_messages_thinking_block_then_tool_use() -> None:
    shape = PlannedMessagesShape("r1", "m", 20, None, AnswerPlan(2, TOOL))
    raw, items = thinking_then_tool_call("anthropic", shape)
    assert [i for i in items if isinstance(i, ToolCall)] == [ToolCall("1")]
    events = message_events(raw)
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    stops = [e["index"] for e in events if e["type"] == "content_block_stop"]
    signatures = [e for e in events if e.get("delta", {}).get("type") == "signature_delta"]
    assert starts == ["thinking", "tool_use"] and stops == [0, 1] and len(signatures) == 1
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_messages_cut_short_in_the_thinking_closes_its_block() -> None:
    raw = stream(PlannedMessagesShape("r1", "m", 20, None, AnswerPlan(4, TOOL)), 2, "length")
    events = message_events(raw)
    assert [e["index"] for e in events if e["type"] == "content_block_stop"] == [0]
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"


def test_final_bodies_say_the_same() -> None:
    text = generated_text(0, 5)
    chat = PlannedChatShape("r1", "m", 1, True, AnswerPlan(2, TOOL, word_offset=0))
    chat_adapter = create_api_adapter("openai-chat")
    decoded = chat_adapter.decode_response(chat.final_body(text, 20, 5, "stop"))
    assert decoded.tool_calls == 1 and decoded.usage == Usage(20, 5, 2)
    body = json.loads(chat.final_body(text, 20, 5, "stop"))
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] == generated_text(0, 2)
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {
        "city": generated_text(2, 3)}
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    msg = PlannedMessagesShape("r1", "m", 20, None, AnswerPlan(2, TOOL, word_offset=0))
    body = json.loads(msg.final_body(text, 20, 5, "stop"))
    assert [b["type"] for b in body["content"]] == ["thinking", "tool_use"]
    assert body["content"][1]["input"] == {"city": generated_text(2, 3)}
    assert body["stop_reason"] == "tool_use"
    assert create_api_adapter("anthropic").decode_response(
        msg.final_body(text, 20, 5, "stop")).tool_calls == 1


def test_plain_answers_keep_the_plain_shapes() -> None:
    kw: dict[str, Any] = {"request_id": "r", "model": "m", "include_usage": True,
                          "prompt_tokens": 3, "cached_tokens": None}
    assert type(chat_shape(PLAIN_ANSWER, **kw)) is ChatShape
    assert type(messages_shape(PLAIN_ANSWER, **kw)) is MessagesShape
    assert isinstance(chat_shape(AnswerPlan(reasoning=1), **kw), PlannedChatShape)


# --- configuration -------------------------------------------------------------------
def test_flags_set_the_sections() -> None:
    config = load_config(None, {"reasoning_share": 0.5, "reasoning_tokens": 64,
                                "tool_call_probability": 0.25})
    assert (config.reasoning.share, config.reasoning.tokens) == (0.5, 64)
    assert config.tool_calls.probability == 0.25
    assert load_config(None, {}).reasoning.share == 0.0
    with pytest.raises(ConfigError, match=r"reasoning\.share"):
        load_config(None, {"reasoning_share": 1.5})


def test_a_bad_flag_is_one_line_and_exit_2() -> None:
    result = CliRunner().invoke(sim_command, ["--tool-call-probability", "2"])
    assert result.exit_code == EXIT_BAD_INPUT
    assert "tool_calls.probability" in result.output and "Traceback" not in result.output
    assert "--reasoning-share" in CliRunner().invoke(sim_command, ["--help"]).output
