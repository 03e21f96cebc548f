"""The JSON, error and usage handling that every API adapter shares.

Kept apart from the adapters so each of them reads as its API's own rules; everything
here is pure and raises `ProtocolError` on a payload no API allows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from zerohop.client.protocols import (
    GenerationRequest,
    ProtocolError,
    StreamError,
    StreamItem,
    Usage,
)
from zerohop.client.sse import SSEEvent
from zerohop.core import json_codec
from zerohop.core.images import EncodedImage
from zerohop.core.records import truncate_message

__all__ = [
    "UsageMergingDecoder",
    "base_headers",
    "chat_history",
    "chat_messages",
    "decode_error_body",
    "encode_json",
    "error_from",
    "optional_count",
    "optional_str",
    "parse_object",
    "with_images",
]


class UsageMergingDecoder:
    """One stream's decoder: every `Usage` it yields carries the latest value of each
    count reported so far in the stream, so the last one is the stream's best answer."""

    __slots__ = ("_decode", "_latest", "_parts")

    def __init__(self, decode: Callable[[SSEEvent, bool], list[StreamItem]], parts: bool
                 ) -> None:
        self._decode = decode  # decode(event, parts): `parts` is passed positionally,
        self._parts = parts  # no partial with keywords: the fast call, once per event
        self._latest: dict[str, int] = {}  # Usage field -> the last count reported

    def decode_event(self, event: SSEEvent) -> list[StreamItem]:
        items = self._decode(event, self._parts)
        for i, item in enumerate(items):
            if isinstance(item, Usage):
                latest = self._latest
                for name in _USAGE_FIELDS:
                    value = getattr(item, name)
                    if value is not None:
                        latest[name] = value
                items[i] = Usage(**{name: latest.get(name) for name in _USAGE_FIELDS})
        return items


_USAGE_FIELDS = tuple(f.name for f in fields(Usage))


def base_headers(request_id: str, stream: bool) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "text/event-stream" if stream else "application/json",
        "x-request-id": request_id,
    }


def encode_json(body: dict[str, Any]) -> bytes:
    return json_codec.dumps(body)


def chat_messages(req: GenerationRequest) -> list[dict[str, str]]:
    """A copy of the request's messages, or its prompt as the one user message."""
    if req.messages is not None:
        return [dict(m) for m in req.messages]
    return [{"role": "user", "content": req.prompt or ""}]


def chat_history(req: GenerationRequest, api: str) -> list[dict[str, str]]:
    """`chat_messages` after the request's system prompt (when it has one), as a chat-
    shaped API takes them; ValueError for a token-id prompt, which it cannot take."""
    if req.messages is None and req.prompt is None:
        raise ValueError(f"prompt: {api} needs prompt or messages, not token ids")
    messages = chat_messages(req)
    if req.system is not None:
        messages.insert(0, {"role": "system", "content": req.system})
    return messages


def with_images(messages: list[dict[str, Any]], images: tuple[EncodedImage, ...],
                image_part: Callable[[EncodedImage], dict[str, Any]],
                text_part: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` (copies, changed in place) with `images` as the API's parts before the
    text of the last user message, where vision models read them as part of the turn
    (after the blocks of one that already has parts, such as Anthropic's tool results,
    which must come first); ValueError when no user message can carry them."""
    if not images:
        return messages
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            parts = [image_part(image) for image in images]
            message["content"] = ([*content, *parts] if isinstance(content, list)
                                  else [*parts, text_part(content or "")])
            return messages
    raise ValueError("images: the request has no user message to carry them")


def parse_object(data: str | bytes) -> dict[str, Any]:
    try:
        obj = json_codec.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and bad UTF-8 bytes
        raise ProtocolError(f"malformed JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def error_from(error: object) -> StreamError:
    """Type from `type`, else `code`; tolerant, because errors are reported, not parsed."""
    if isinstance(error, str):
        return StreamError("unknown", truncate_message(error) or "")
    if not isinstance(error, dict):
        return StreamError("unknown", truncate_message(repr(error)) or "")
    kind = error.get("type")
    if kind is None or kind == "":
        kind = error.get("code")
    message = error.get("message")
    return StreamError(
        str(kind) if kind not in (None, "") else "unknown",
        truncate_message(message if isinstance(message, str) else json.dumps(error)) or "",
    )


def decode_error_body(status: int, body: bytes) -> StreamError:
    """Best effort over OpenAI, vLLM, Anthropic and FastAPI error shapes; never raises.
    Without a type in the body, the type is `http_<status>`."""
    fallback = f"http_{status}"
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        return StreamError(fallback, _text_of(body))
    if "error" in obj:  # OpenAI, new vLLM, Anthropic
        error = error_from(obj["error"])
    elif "detail" in obj:  # FastAPI / Starlette
        detail = obj["detail"]
        error = error_from(detail if isinstance(detail, str) else {"message": repr(detail)})
    else:  # older vLLM `{"object": "error", ...}` and other flat shapes
        error = error_from(obj)
    return StreamError(
        error.error_type if error.error_type != "unknown" else fallback,
        error.message or _text_of(body),
    )


def _text_of(body: bytes) -> str:
    return truncate_message(body.decode("utf-8", "replace").strip()) or ""


def optional_count(obj: dict[str, Any], key: str, api: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError(f"{api}: '{key}' is not a non-negative integer: {value!r}")
    return value


def optional_str(obj: dict[str, Any], key: str, api: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError(f"{api}: '{key}' is not a string")
