"""POST /tokenize as vLLM and SGLang serve it, under the sim's documented counting rule.

A client sizes prompts exactly by asking the server how it counts them, and the count
must be the one the server then reports as `usage.prompt_tokens`: the whole request,
the chat template's tokens included. Request: `{"model", "prompt"}` (text or token ids)
or `{"model", "messages"}` (with vLLM's `add_generation_prompt`, default true: the
assistant primer counts). Response: `{"count", "max_model_len", "tokens"}`.

The sim has no vocabulary, so a text token's id is a stable hash of its text: the same
word always gets the same id, and `len(tokens)` is the count `tokens.py` documents.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from zerohop.sim.api_shapes import error_body
from zerohop.sim.tokens import (
    CHAT_MESSAGE_OVERHEAD,
    CHAT_REQUEST_OVERHEAD,
    NON_TEXT_PART_TOKENS,
    TOKEN_PATTERN,
)

__all__ = [
    "TOKENIZE_PATH", "TokenizeError", "request_prompt_ids", "tokenize_ids", "tokenize_response",
]

TOKENIZE_PATH = "/tokenize"
_MESSAGE_IDS = tuple(range(1, 1 + CHAT_MESSAGE_OVERHEAD))  # role header and separators
_PRIMER_IDS = tuple(range(10, 10 + CHAT_REQUEST_OVERHEAD))  # the assistant primer
_NON_TEXT_ID = 20
_TEXT_ID_BASE, _TEXT_ID_SPAN = 1000, 31_000


class TokenizeError(ValueError):
    """The body is not a tokenize request (HTTP 400, the message says why)."""


def tokenize_ids(body: dict[str, Any]) -> list[int]:
    """The ids the sim counts for a tokenize request's prompt or messages."""
    if "messages" in body:
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise TokenizeError("`messages` must be a non-empty list")
        ids: list[int] = []
        for message in messages:
            if not isinstance(message, dict):
                raise TokenizeError("each message must be an object")
            ids += _MESSAGE_IDS
            ids += _content_ids(message.get("content"))
        if body.get("add_generation_prompt", True):
            ids += _PRIMER_IDS
        return ids
    if "prompt" in body:
        return _prompt_ids(body["prompt"])
    raise TokenizeError("`prompt` or `messages` is required")


def request_prompt_ids(api: str, body: dict[str, Any]) -> list[int]:
    """The ids of a generation request's prompt (`api`: chat, completions or messages),
    the ones /tokenize gives for it: the prefix cache keys on them. A completions batch
    counts its first prompt; an Anthropic `system` is one more message, first."""
    if api == "completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        return _prompt_ids(prompt)
    ids: list[int] = []
    system = body.get("system") if api == "messages" else None
    if system is not None:
        ids += _MESSAGE_IDS
        ids += _content_ids(system)
    return ids + tokenize_ids({"messages": body.get("messages")})


def tokenize_response(raw: bytes, routes: Mapping[str, tuple[Any, str | None]],
                      default_engine: Any) -> tuple[int, bytes]:
    """(status, body) for a POST /tokenize; `routes` maps served names to (engine,
    adapter), and a request without `model` asks the first engine."""
    try:
        body = json.loads(raw or b"{}")
        if not isinstance(body, dict):
            raise TokenizeError("request body must be a JSON object")
        model = body.get("model")
        route = routes.get(model) if model else (default_engine, None)
        if route is None:
            return 404, error_body("chat", 404, f"The model `{model}` does not exist.")
        ids = tokenize_ids(body)
    except (ValueError, UnicodeDecodeError) as exc:  # TokenizeError and bad JSON
        return 400, error_body("chat", 400, str(exc))
    max_model_len = route[0].max_model_len
    return 200, json.dumps({"count": len(ids), "max_model_len": max_model_len,
                            "tokens": ids}).encode()


def _prompt_ids(prompt: Any) -> list[int]:
    if isinstance(prompt, str):
        return _text_ids(prompt)
    if isinstance(prompt, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in prompt
    ):
        return list(prompt)
    raise TokenizeError("`prompt` must be a string or a list of token ids")


def _content_ids(content: Any) -> list[int]:
    """Mirrors tokens.count_content_tokens: text parts by the rule, other parts a fixed
    number of placeholder tokens."""
    if content is None:
        return []
    if isinstance(content, str):
        return _text_ids(content)
    if not isinstance(content, list):
        raise TokenizeError("message content must be a string or a list of parts")
    ids: list[int] = []
    for part in content:
        if isinstance(part, str):
            ids += _text_ids(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            ids += _text_ids(part["text"])
        elif isinstance(part, dict) and part.get("type") == "tool_result":
            ids += _content_ids(part.get("content"))
        else:
            ids += [_NON_TEXT_ID] * NON_TEXT_PART_TOKENS
    return ids


def _text_ids(text: str) -> list[int]:
    return [_TEXT_ID_BASE + zlib.crc32(match.encode()) % _TEXT_ID_SPAN
            for match in TOKEN_PATTERN.findall(text)]
