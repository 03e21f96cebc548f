"""Tools and a tool-calling history on the Anthropic messages API.

A workload states its tools as OpenAI function tool definitions and keeps an agent
loop's history in the chat API's shape: an assistant message with its `tool_calls`
(`id`, `type: function`, `function: {name, arguments}`, the arguments exactly as they
streamed), then one `{"role": "tool", "tool_call_id", "content"}` message per call.
Anthropic says the same with content blocks: the assistant message holds a `tool_use`
block (`id`, `name`, `input`: the arguments parsed) after any text, and the results
of one turn's calls come back together, as `tool_result` blocks of one user message.
Pure: the Anthropic adapter calls these while building a request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = ["anthropic_messages", "anthropic_tool_choice", "anthropic_tools", "tool_input"]

_TOOL_CHOICE: Mapping[str, dict[str, str]] = MappingProxyType({
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
})
_EMPTY_SCHEMA: Mapping[str, Any] = MappingProxyType({"type": "object", "properties": {}})


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tool definitions as Anthropic's `{name, description,
    input_schema}`; ValueError for an entry that is not a function tool."""
    converted = []
    for tool in tools:
        function = tool.get("function")
        if tool.get("type") != "function" or not isinstance(function, Mapping):
            raise ValueError(f"tools: not an OpenAI function tool definition: {tool!r}")
        entry: dict[str, Any] = {"name": function["name"]}
        if function.get("description") is not None:
            entry["description"] = function["description"]
        entry["input_schema"] = dict(function.get("parameters") or _EMPTY_SCHEMA)
        converted.append(entry)
    return converted


def anthropic_tool_choice(choice: str) -> dict[str, str]:
    """`auto` | `required` | `none` as Anthropic's `{"type": "auto" | "any" | "none"}`."""
    try:
        return dict(_TOOL_CHOICE[choice])
    except KeyError:
        raise ValueError(f"tool_choice: {choice!r} is not auto, required or none") from None


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's streamed argument text as the object Anthropic's `input` takes (no text
    at all: no arguments); ValueError when it is not a JSON object."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        raise ValueError(f"tool call arguments are not JSON: {arguments[:80]!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"tool call arguments are not a JSON object: {arguments[:80]!r}")
    return value


def anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A chat-shaped history as Anthropic messages: assistant `tool_calls` become
    `tool_use` blocks, consecutive `tool` messages one user message of `tool_result`
    blocks; every other message is copied as it is."""
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the user message being filled
    for message in messages:
        role = message.get("role")
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                     "content": message.get("content") or ""}
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(block)
            continue
        results = None
        calls = message.get("tool_calls")
        if role == "assistant" and calls:
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            for call in calls:
                function = call["function"]
                blocks.append({"type": "tool_use", "id": call["id"], "name": function["name"],
                               "input": tool_input(function.get("arguments") or "")})
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append(dict(message))
    return out
