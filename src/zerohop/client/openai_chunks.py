"""What an OpenAI-style streamed choice says about generated tokens beyond its text.

Two things the chat and completions adapters (openai_adapters.py) need and the wire formats
only imply: how many tokens a chunk holds (only per-token logprobs say), and the
generated text of a tool call, which arrives in `delta.tool_calls[].function.arguments`
with `content` null (OpenAI, vLLM, SGLang, TGI, llama.cpp, Ollama). Those arguments are
the answer: without them a tool-call answer would have no first token and no content
events. They count as Anthropic's `input_json_delta` does; the function name, sent once
with empty arguments, does not (neither does Anthropic's `content_block_start`).
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
