"""POST /tokenize as vLLM and SGLang serve it, under the sim's documented counting rule.

A client sizes prompts exactly by asking the server how it counts them, and the count
must be the one the server then reports as `usage.prompt_tokens`: the whole request,
the chat template's tokens included. Request: `{"model", "prompt"}` (text or token ids)
or `{"model", "messages"}` (with vLLM's `add_generation_prompt`, default true: the
assistant primer counts). Response: `{"count", "max_model_len", "tokens"}`, and
`token_strs` with `"return_token_strs": true`.

The sim has no vocabulary, so a text token's id is a stable hash of its text: the same
word always gets the same id, and `len(tokens)` is the count `tokens.py` documents.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from zerohop.sim.answers.api_shapes import error_body
from zerohop.sim.answers.body_forms import body_form
from zerohop.sim.answers.image_parts import image_part
from zerohop.sim.answers.tokens import (
    CHAT_MESSAGE_OVERHEAD,
    CHAT_REQUEST_OVERHEAD,
    NON_TEXT_PART_TOKENS,
    TOKEN_PATTERN,
)

__all__ = [
    "TOKENIZE_PATH", "TokenizeError", "chat_prompt_ids", "prompt_ids", "request_prompt_ids",
    "token_strs", "tokenize_ids", "tokenize_response",
]

TOKENIZE_PATH = "/tokenize"
_MESSAGE_IDS = tuple(range(1, 1 + CHAT_MESSAGE_OVERHEAD))  # role header and separators
_PRIMER_IDS = tuple(range(10, 10 + CHAT_REQUEST_OVERHEAD))  # the assistant primer
_NON_TEXT_ID = 20
_TEXT_ID_BASE, _TEXT_ID_SPAN = 1000, 31_000
T = TypeVar("T", int, str)


class TokenizeError(ValueError):
    """The body is not a tokenize request (HTTP 400, the message says why)."""


def tokenize_ids(body: dict[str, Any]) -> list[int]:
    """The ids the sim counts for a tokenize request's prompt or messages."""
    return _request_tokens(body, _IDS)


def token_strs(body: dict[str, Any]) -> list[str]:
    """The tokens of `tokenize_ids(body)` as strings (vLLM's `return_token_strs`): a
    text token is its match, after a space when whitespace came before it (where
    byte-level BPE writes `Ġ`); the template's and other parts' tokens are named."""
    return _request_tokens(body, _STRS)


def request_prompt_ids(api: str, body: dict[str, Any]) -> list[int]:
    """The ids of a generation request's prompt in body form `api` (its entry's
    `prompt_ids`), the ones /tokenize gives for it: the prefix cache keys on them."""
    return body_form(api).prompt_ids(body)


def prompt_ids(prompt: Any) -> list[int]:
    """The ids of a completions prompt: text, or token ids as they are."""
    return _prompt_ids(prompt)


def chat_prompt_ids(messages: Any, system: Any = None) -> list[int]:
    """The ids of chat messages (with the assistant primer); a `system` given apart (as
    Anthropic's is) is one more message, first."""
    ids: list[int] = []
    if system is not None:
        ids += _MESSAGE_IDS
        ids += _content_ids(system)
    return ids + tokenize_ids({"messages": messages})


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
        strings = token_strs(body) if body.get("return_token_strs") else None
    except (ValueError, UnicodeDecodeError) as exc:  # TokenizeError and bad JSON
        return 400, error_body("chat", 400, str(exc))
    answer = {"count": len(ids), "max_model_len": route[0].max_model_len, "tokens": ids}
    if strings is not None:
        answer["token_strs"] = strings
    return 200, json.dumps(answer).encode()


@dataclass(frozen=True)
class _Spelling(Generic[T]):
    """How tokens are written: as ids or as strings."""

    text: Callable[[str], list[T]]
    message: tuple[T, ...]  # a message's role header and separators
    primer: tuple[T, ...]  # the assistant primer
    non_text: T  # a part that is neither text nor an image's data
    image: Callable[[int], T]  # an image's tokens, from a digest of its data
    token_id: Callable[[int], T]  # a prompt given as token ids


def _request_tokens(body: dict[str, Any], spell: _Spelling[T]) -> list[T]:
    if "messages" in body:
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise TokenizeError("`messages` must be a non-empty list")
        tokens: list[T] = []
        for message in messages:
            if not isinstance(message, dict):
                raise TokenizeError("each message must be an object")
            tokens += spell.message
            tokens += _content_tokens(message.get("content"), spell)
        if body.get("add_generation_prompt", True):
            tokens += spell.primer
        return tokens
    if "prompt" in body:
        return _prompt_tokens(body["prompt"], spell)
    raise TokenizeError("`prompt` or `messages` is required")


def _prompt_ids(prompt: Any) -> list[int]:
    return _prompt_tokens(prompt, _IDS)


def _prompt_tokens(prompt: Any, spell: _Spelling[T]) -> list[T]:
    if isinstance(prompt, str):
        return spell.text(prompt)
    if isinstance(prompt, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in prompt
    ):
        return [spell.token_id(i) for i in prompt]
    raise TokenizeError("`prompt` must be a string or a list of token ids")


def _content_ids(content: Any) -> list[int]:
    return _content_tokens(content, _IDS)


def _content_tokens(content: Any, spell: _Spelling[T]) -> list[T]:
    """Mirrors tokens.count_content_tokens: text parts by the rule, other parts a fixed
    number of placeholder tokens."""
    if content is None:
        return []
    if isinstance(content, str):
        return spell.text(content)
    if not isinstance(content, list):
        raise TokenizeError("message content must be a string or a list of parts")
    tokens: list[T] = []
    for part in content:
        if isinstance(part, str):
            tokens += spell.text(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            tokens += spell.text(part["text"])
        elif isinstance(part, dict) and part.get("type") == "tool_result":
            tokens += _content_tokens(part.get("content"), spell)
        else:
            image = image_part(part) if isinstance(part, dict) else None
            if image is None:
                tokens += [spell.non_text] * NON_TEXT_PART_TOKENS
            else:  # one id per image, from its bytes: the prefix cache tells images apart
                tokens += [spell.image(zlib.crc32(image[1].encode()))] * image[0]
    return tokens


def _text_ids(text: str) -> list[int]:
    return [_TEXT_ID_BASE + zlib.crc32(match.encode()) % _TEXT_ID_SPAN
            for match in TOKEN_PATTERN.findall(text)]


def _text_strs(text: str) -> list[str]:
    return [(" " if match.start() and text[match.start() - 1].isspace() else "")
            + match.group() for match in TOKEN_PATTERN.finditer(text)]


_IDS: _Spelling[int] = _Spelling(text=_text_ids, message=_MESSAGE_IDS, primer=_PRIMER_IDS,
                                 non_text=_NON_TEXT_ID, token_id=int,
                                 image=lambda digest: _TEXT_ID_BASE + digest % _TEXT_ID_SPAN)
_STRS: _Spelling[str] = _Spelling(
    text=_text_strs, message=("<|message|>",) * CHAT_MESSAGE_OVERHEAD,
    primer=("<|assistant|>",) * CHAT_REQUEST_OVERHEAD, non_text="<|part|>",
    token_id=lambda i: f"<|{i}|>", image=lambda digest: "<|image|>")
