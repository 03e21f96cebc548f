"""What one answer holds, drawn when its request arrives: the embedded target playing a
reasoning model (a share of requests think before answering) and a tool-calling one (a
request that offers `tools` is answered with one call, with a configured probability).

Thinking tokens are decode steps like any other output token: they come first, cost the
same step time and count in `completion_tokens`; `max_tokens` caps thinking and answer
together, as it does on vLLM. A tool call's answer is its JSON arguments,
`ToolCallConfig.argument_tokens` tokens long (with `ignore_eos`, as every answer, up to
`max_tokens`). The draws are seeded by (seed, request_id), like the answer length
(tokens.py), so a client that sets x-request-id gets the same plan in any arrival order.
Chat completions, Responses and Anthropic messages only: /v1/completions has a place for
neither.

Structured output: a chat request's `response_format.json_schema.schema` or a Responses
request's `text.format.schema` makes the answer a JSON document that follows the schema
(structured_answer.py), its words in the document's one string slot; a configured share
of them (`structured_output.invalid_share`) answers with the bare words instead, which
no JSON parser takes (so a client's validity share has something to find).

`tool_choice` is honoured: "none" never calls, "required" (OpenAI) / "any" (Anthropic)
and a named function always call (the named one), "auto" or none given leaves it to
the probability.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from zerohop.sim.answers.body_forms import body_form
from zerohop.sim.answers.structured_answer import requested_schema, schema_frame
from zerohop.sim.config import ReasoningConfig, StructuredOutputConfig, ToolCallConfig

DEFAULT_ARGUMENT = "query"  # the argument's key when the tool's schema names none


@dataclass(frozen=True, slots=True)
class ToolCallPlan:
    """The one tool call an answer makes: which tool, the key of its one argument, and
    how many tokens its arguments take."""

    name: str
    argument: str
    tokens: int


@dataclass(frozen=True, slots=True)
class AnswerPlan:
    """`reasoning` thinking tokens first, then the answer: text, or `tool`'s call.
    `word_offset` is where the request's generated words start (tokens.word_offset).
    `json_frame`: a structured answer's text before and after its words."""

    reasoning: int = 0
    tool: ToolCallPlan | None = None
    word_offset: int = 0
    json_frame: tuple[str, str] | None = None

    @property
    def plain(self) -> bool:
        return self.reasoning == 0 and self.tool is None and self.json_frame is None

    def argument_frame(self) -> tuple[str, str]:
        """The text before and after the answer's words: a tool call's one-argument JSON
        object, a structured answer's document, or nothing."""
        if self.tool is not None:
            return "{" + json.dumps(self.tool.argument) + ':"', '"}'
        return self.json_frame or ("", "")

    def output_tokens(
        self, drawn: int, *, max_tokens: int, ignore_eos: bool, min_tokens: int
    ) -> int:
        """The whole answer's length, thinking included, from the plain answer's drawn
        length (tokens.draw_output_tokens); a plain plan keeps `drawn`."""
        if self.plain:
            return drawn
        if ignore_eos:
            return max(1, max_tokens)
        answer = self.tool.tokens if self.tool is not None else drawn
        return max(1, min(max_tokens, max(self.reasoning + answer, min_tokens)))

    def reasoning_in(self, completion: int) -> int:
        """Thinking tokens among the first `completion` output tokens."""
        return min(self.reasoning, completion)

    def tool_calls_in(self, completion: int) -> int:
        """Tool calls the first `completion` output tokens opened (0 or 1)."""
        return 1 if self.tool is not None and completion > self.reasoning else 0


PLAIN_ANSWER = AnswerPlan()


def draw_answer_plan(
    api: str,
    body: dict[str, Any],
    *,
    reasoning: ReasoningConfig,
    tool_calls: ToolCallConfig,
    seed: int,
    request_id: str,
    word_offset: int,
    structured: StructuredOutputConfig | None = None,
) -> AnswerPlan:
    """The plan of one request's answer (see the module docstring)."""
    if body_form(api).answer is None:  # a form whose answers are plain text only
        return PLAIN_ANSWER
    thinking = 0
    if reasoning.share > 0:
        rng = _rng(seed, request_id, "reasoning")
        if rng.random() < reasoning.share:
            median = math.log(reasoning.tokens)
            thinking = max(1, round(math.exp(median + reasoning.sigma * rng.gauss())))
    tool = _draw_tool_call(api, body, tool_calls, _rng(seed, request_id, "tool"))
    frame = None
    schema = requested_schema(api, body)
    if schema is not None:
        invalid = structured.invalid_share if structured is not None else 0.0
        if not _rng(seed, request_id, "structured").random() < invalid:
            frame = schema_frame(schema)
    if thinking == 0 and tool is None and frame is None:
        return PLAIN_ANSWER
    return AnswerPlan(thinking, tool, word_offset, frame)


def _draw_tool_call(
    api: str, body: dict[str, Any], config: ToolCallConfig, rng: random.Random
) -> ToolCallPlan | None:
    tools = offered_tools(api, body)
    if not tools:
        return None
    mode, named = tool_choice(api, body)
    if mode == "none":
        return None
    if mode == "auto" and not rng.random() < config.probability:
        return None
    chosen = next((t for t in tools if t[0] == named), None) or rng.choice(tools)
    return ToolCallPlan(chosen[0], chosen[1], config.argument_tokens)


def offered_tools(api: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, argument key) of each tool the request offers: OpenAI chat's
    `{"type": "function", "function": {"name", "parameters"}}`, Responses'
    `{"type": "function", "name", "parameters"}`, Anthropic's `{"name", "input_schema"}`.
    Entries it cannot read are skipped."""
    tools = body.get("tools")
    reading = body_form(api).answer
    if not isinstance(tools, list) or reading is None:
        return []
    found: list[tuple[str, str]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        key = reading.tool_function_key
        spec = tool.get(key) if key is not None else tool
        if not isinstance(spec, dict):
            continue
        name = spec.get("name")
        schema = spec.get(reading.tool_schema_key)
        if isinstance(name, str) and name:
            found.append((name, _first_property(schema)))
    return found


def tool_choice(api: str, body: dict[str, Any]) -> tuple[str, str | None]:
    """("none" | "auto" | "required", the function it names): OpenAI's "none", "auto",
    "required" or `{"type": "function", "function": {"name"}}` (Responses:
    `{"type": "function", "name"}`); Anthropic's
    `{"type": "none" | "auto" | "any" | "tool", "name"}`. Absent or unreadable: auto."""
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        return (choice, None) if choice in ("none", "required") else ("auto", None)
    if not isinstance(choice, dict):
        return "auto", None
    reading = body_form(api).answer
    named = reading.named_tool_choice(choice) if reading is not None else None
    return named if named is not None else ("auto", None)


def _first_property(schema: object) -> str:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        for key in properties:
            if isinstance(key, str) and key:
                return key
    return DEFAULT_ARGUMENT


def _rng(seed: int, request_id: str, salt: str) -> random.Random:
    digest = hashlib.blake2b(f"{seed}:{request_id}:{salt}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little"))
