"""What an OpenAI-style streamed choice says about generated tokens beyond its text.

What the chat and completions adapters (openai_adapters.py) need and the wire formats
only imply: how many tokens a chunk holds (only per-token logprobs say), the generated
text of a tool call, which arrives in `delta.tool_calls[].function.arguments` with
`content` null (OpenAI, vLLM, SGLang, TGI, llama.cpp, Ollama), and which tool calls a
delta opens. The arguments are the answer: without them a tool-call answer would have no
first token and no content events. They count as Anthropic's `input_json_delta` does;
the function name, sent once with empty arguments, does not (neither does Anthropic's
`content_block_start`), but it is what opens a call: a call is counted by the entry
that names its function, told apart from the others by its `index`.
"""

from __future__ import annotations

from typing import Any


def logprob_count(choice: dict[str, Any], key: str) -> int | None:
    """Tokens in a chunk, when per-token logprobs are present (the only place the OpenAI
    formats say how many tokens a chunk carries)."""
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        tokens = logprobs.get(key)
        if isinstance(tokens, list) and tokens:
            return len(tokens)
    return None


def tool_call_text(delta: dict[str, Any]) -> str:
    """The argument fragments of every tool call in one chat delta, joined; "" when the
    delta has none. Tolerant of shapes it does not know (an extension, a null): a tool
    call it cannot read adds nothing rather than failing the stream."""
    calls = delta.get("tool_calls")
    if not isinstance(calls, list):
        return ""
    parts: list[str] = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str) and arguments:
            parts.append(arguments)
    return "".join(parts)


def tool_call_openings(choice_index: object, delta: dict[str, Any]) -> list[str]:
    """A key per tool call this delta opens (the entry naming its function): the
    choice's and the call's index, so a server repeating the name (TGI sends the id on
    every fragment) still counts one call. Shapes it cannot read open nothing."""
    return [key for key, _id, name, _args in tool_call_entries(choice_index, delta) if name]


def tool_call_entries(choice_index: object, delta: dict[str, Any]
                      ) -> list[tuple[str, str | None, str | None, str]]:
    """(key, id, function name, argument fragment) of each tool-call entry of a delta
    that it can read: the key as `tool_call_openings` gives it, the id and name where
    the entry says them (None otherwise), the fragment "" where it has none."""
    calls = delta.get("tool_calls")
    if not isinstance(calls, list):
        return []
    entries: list[tuple[str, str | None, str | None, str]] = []
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        name, arguments, call_id = function.get("name"), function.get("arguments"), call.get("id")
        index = call.get("index")
        which = index if isinstance(index, int) and not isinstance(index, bool) else position
        entries.append((
            f"{choice_index}:{which}",
            call_id if isinstance(call_id, str) and call_id else None,
            name if isinstance(name, str) and name else None,
            arguments if isinstance(arguments, str) else "",
        ))
    return entries


def reasoning_token_count(usage: dict[str, Any]) -> object:
    """Where a usage object says how many output tokens were reasoning: OpenAI's
    `completion_tokens_details.reasoning_tokens`, else SGLang's top-level
    `reasoning_tokens`; None when neither says. The caller validates the value."""
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
        return details["reasoning_tokens"]
    return usage.get("reasoning_tokens")
