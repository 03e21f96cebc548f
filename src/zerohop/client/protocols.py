"""Protocol adapters: OpenAI chat, OpenAI completions and Anthropic messages.

An adapter does two pure jobs at the edges of a request, so that a transport (Locust
user, benchmark client, test) never needs to know which API it is talking to:
`build_request` turns a `GenerationRequest` into method/path/headers/body, and a
per-stream decoder turns each `SSEEvent` into typed `StreamItem`s (content, usage,
in-stream error, terminator). Malformed or unexpected payloads raise `ProtocolError`,
which the caller records as the `protocol_error` outcome. Nothing here does I/O.

Usage semantics: `Usage` fields are cumulative counts as the server last reported them;
`None` means "this event did not say". A stream decoder merges what earlier events of
the same stream said (Anthropic reports input tokens at the start and output tokens at
the end), so the last `Usage` a decoder yields is the stream's best answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from zerohop.client.openai_chunks import logprob_count, tool_call_text
from zerohop.client.sse import SSEEvent
from zerohop.core.records import truncate_message

__all__ = [
    "API_NAMES",
    "AnthropicMessagesAdapter",
    "ApiAdapter",
    "ContentDelta",
    "GenerationRequest",
    "HttpRequest",
    "OpenAIChatAdapter",
    "OpenAICompletionsAdapter",
    "ProtocolError",
    "StreamDecoder",
    "StreamError",
    "StreamItem",
    "Terminator",
    "Usage",
    "api_key_from_env",
    "create_adapter",
]


# --- stream items -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ContentDelta:
    """Generated content (answer text or reasoning). `tokens` only when the wire format
    says how many tokens the chunk holds (e.g. per-token logprobs); otherwise None."""

    text: str
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Latest cumulative token counts the server reported; None = not reported."""

    input_tokens: int | None
    output_tokens: int | None


@dataclass(frozen=True, slots=True)
class StreamError:
    """An error the server sent inside a stream (or as an HTTP error body)."""

    error_type: str
    message: str


@dataclass(frozen=True, slots=True)
class Terminator:
    """The stream's explicit end: `data: [DONE]` or `message_stop`."""


StreamItem = ContentDelta | Usage | StreamError | Terminator


class ProtocolError(ValueError):
    """The server sent something this API does not allow: bad JSON or a wrong shape."""


# --- requests -----------------------------------------------------------------------
@dataclass
class GenerationRequest:
    """What a workload asks for, independent of the API that will carry it."""

    model: str
    max_tokens: int
    prompt: str | None = None  # completions text, or the single user message
    prompt_token_ids: list[int] | None = None  # completions only; wins over `prompt`
    messages: list[dict[str, str]] | None = None  # chat/messages; built from prompt if None
    system: str | None = None
    temperature: float = 0.0
    stop: list[str] | None = None
    ignore_eos: bool = False  # sent only where the server supports it (OpenAI-style/vLLM)
    extra_body: dict[str, Any] = field(default_factory=dict)  # merged last: it wins

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model: must be a non-empty string")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens: must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature: must be >= 0, got {self.temperature}")
        if self.prompt is None and self.prompt_token_ids is None and self.messages is None:
            raise ValueError("prompt: one of prompt, prompt_token_ids or messages is required")


_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
_REDACTED = "<redacted>"


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request, ready for any client. Its repr never shows credentials."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def __repr__(self) -> str:
        return (
            f"HttpRequest(method={self.method!r}, path={self.path!r}, "
            f"headers={redact_headers(self.headers)!r}, body={self.body!r})"
        )

    __str__ = __repr__


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of `headers` safe for logs, manifests and reprs."""
    return {k: (_REDACTED if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()}


# --- the adapter contract -----------------------------------------------------------
class StreamDecoder(Protocol):
    """Decodes the events of ONE stream, keeping whatever state the API needs."""

    def decode_event(self, event: SSEEvent) -> list[StreamItem]: ...


class ApiAdapter(Protocol):
    name: str

    def build_request(
        self, req: GenerationRequest, *, api_key: str | None, request_id: str, stream: bool = True
    ) -> HttpRequest: ...

    def new_stream_decoder(self) -> StreamDecoder: ...

    def decode_event(self, event: SSEEvent) -> list[StreamItem]:
        """Stateless decode of one event (no merging across events of a stream)."""
        ...

    def decode_error_body(self, status: int, body: bytes) -> StreamError: ...

    def decode_response(self, body: bytes) -> tuple[str, Usage]: ...


def create_adapter(name: str) -> ApiAdapter:
    """The adapter for an API name; unknown names list the valid ones."""
    factory = _ADAPTERS.get(name)
    if factory is None:
        raise ValueError(f"api: unknown API {name!r}; valid: {', '.join(API_NAMES)}")
    return factory()


def api_key_from_env(api: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """ZEROHOP_API_KEY first, then the API's usual variable. Empty values count as unset."""
    if api not in _ADAPTERS:
        raise ValueError(f"api: unknown API {api!r}; valid: {', '.join(API_NAMES)}")
    vendor_var = "ANTHROPIC_API_KEY" if api == "anthropic" else "OPENAI_API_KEY"
    for var in ("ZEROHOP_API_KEY", vendor_var):
        value = environ.get(var)
        if value:
            return value
    return None


# --- OpenAI (chat and completions) --------------------------------------------------
class _OpenAIBase:
    """What the two OpenAI-style APIs share: framing, errors, usage, auth."""

    name: str = ""
    path: str = ""

    def build_request(
        self, req: GenerationRequest, *, api_key: str | None, request_id: str, stream: bool = True
    ) -> HttpRequest:
        body: dict[str, Any] = {"model": req.model, **self._prompt_fields(req)}
        body["max_tokens"] = req.max_tokens
        body["temperature"] = req.temperature
        if req.stop:
            body["stop"] = list(req.stop)
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        if req.ignore_eos:
            body["ignore_eos"] = True
        body.update(req.extra_body)
        headers = _base_headers(request_id, stream)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return HttpRequest("POST", self.path, headers, _encode_json(body))

    def new_stream_decoder(self) -> StreamDecoder:
        return _UsageMergingDecoder(self.decode_event)

    def decode_event(self, event: SSEEvent) -> list[StreamItem]:
        data = event.data
        if not data.startswith("{") and data.strip() == "[DONE]":
            return [Terminator()]
        obj = _parse_object(data)
        if "error" in obj or "object" in obj:
            error = _openai_error(obj)
            if error is not None:
                return [error]
        choices = obj.get("choices")
        usage = obj.get("usage")
        if choices is None and usage is None:
            raise ProtocolError(f"{self.name}: chunk has neither 'choices' nor 'usage'")
        items: list[StreamItem] = []
        if choices is not None:
            if not isinstance(choices, list):
                raise ProtocolError(f"{self.name}: 'choices' is not a list")
            for choice in choices:
                if not isinstance(choice, dict):
                    raise ProtocolError(f"{self.name}: a choice is not an object")
                self._choice_items(choice, items)
        if usage is not None:
            items.append(_openai_usage(usage))
        return items

    def decode_error_body(self, status: int, body: bytes) -> StreamError:
        return _decode_error_body(status, body)

    def decode_response(self, body: bytes) -> tuple[str, Usage]:
        obj = _parse_object(body)
        error = _openai_error(obj)
        if error is not None:
            raise ProtocolError(f"{self.name}: error in response: {error.error_type}")
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise ProtocolError(f"{self.name}: response has no 'choices' list")
        parts: list[str] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise ProtocolError(f"{self.name}: a choice is not an object")
            parts.extend(self._response_texts(choice))
        usage_obj = obj.get("usage")
        usage = _openai_usage(usage_obj) if usage_obj is not None else Usage(None, None)
        return "".join(parts), usage

    # subclass hooks
    def _prompt_fields(self, req: GenerationRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _choice_items(self, choice: dict[str, Any], items: list[StreamItem]) -> None:
        raise NotImplementedError

    def _response_texts(self, choice: dict[str, Any]) -> list[str]:
        raise NotImplementedError


class OpenAIChatAdapter(_OpenAIBase):
    """POST /v1/chat/completions (OpenAI, vLLM, SGLang, most gateways)."""

    name = "openai-chat"
    path = "/v1/chat/completions"

    def _prompt_fields(self, req: GenerationRequest) -> dict[str, Any]:
        if req.messages is None and req.prompt is None:
            raise ValueError(f"prompt: {self.name} needs prompt or messages, not token ids")
        messages = _chat_messages(req)
        if req.system is not None:
            messages.insert(0, {"role": "system", "content": req.system})
        return {"messages": messages}

    def _choice_items(self, choice: dict[str, Any], items: list[StreamItem]) -> None:
        delta = choice.get("delta")
        if delta is None:
            return
        if not isinstance(delta, dict):
            raise ProtocolError(f"{self.name}: 'delta' is not an object")
        content = _optional_str(delta, "content", self.name)
        # vLLM has used both names for reasoning (and may send both, mirrored): take one
        reasoning = _optional_str(delta, "reasoning_content", self.name) or _optional_str(
            delta, "reasoning", self.name
        )
        tool_text = tool_call_text(delta)  # a tool call's arguments (openai_chunks.py)
        if not content and not reasoning and not tool_text:
            return  # role-only, finish-reason-only and empty chunks carry no content
        tokens = logprob_count(choice, "content") if choice.get("logprobs") else None
        for text in (reasoning, content, tool_text):
            if text:
                items.append(ContentDelta(text, tokens))
                tokens = None  # the count belongs to the chunk: attach it once

    def _response_texts(self, choice: dict[str, Any]) -> list[str]:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ProtocolError(f"{self.name}: a choice has no 'message' object")
        texts: list[str] = []
        reasoning = _optional_str(message, "reasoning_content", self.name) or _optional_str(
            message, "reasoning", self.name
        )
        if reasoning:
            texts.append(reasoning)
        content = _optional_str(message, "content", self.name)
        if content:
            texts.append(content)
        return texts


class OpenAICompletionsAdapter(_OpenAIBase):
    """POST /v1/completions: raw text or token-id prompts, no chat template."""

    name = "openai-completions"
    path = "/v1/completions"

    def _prompt_fields(self, req: GenerationRequest) -> dict[str, Any]:
        if req.messages is not None:
            raise ValueError(f"messages: {self.name} takes a prompt, not chat messages")
        if req.system is not None:
            raise ValueError(f"system: {self.name} has no system prompt; put it in prompt")
        if req.prompt_token_ids is not None:
            return {"prompt": list(req.prompt_token_ids)}
        return {"prompt": req.prompt}

    def _choice_items(self, choice: dict[str, Any], items: list[StreamItem]) -> None:
        text = _optional_str(choice, "text", self.name)
        if text:
            tokens = logprob_count(choice, "tokens") if choice.get("logprobs") else None
            items.append(ContentDelta(text, tokens))

    def _response_texts(self, choice: dict[str, Any]) -> list[str]:
        text = _optional_str(choice, "text", self.name)
        return [text] if text else []


# --- Anthropic messages -------------------------------------------------------------
ANTHROPIC_VERSION = "2023-06-01"

# content_block_delta kinds that carry generated tokens, and the field holding them
_ANTHROPIC_DELTA_TEXT = MappingProxyType(
    {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
)


class AnthropicMessagesAdapter:
    """POST /v1/messages with Anthropic's typed event stream."""

    name = "anthropic"
    path = "/v1/messages"

    def build_request(
        self, req: GenerationRequest, *, api_key: str | None, request_id: str, stream: bool = True
    ) -> HttpRequest:
        if req.messages is None and req.prompt is None:
            raise ValueError(f"prompt: {self.name} needs prompt or messages, not token ids")
        messages = _chat_messages(req)
        # Anthropic takes the system prompt as a field, not as a message
        system_parts = [req.system] if req.system is not None else []
        system_parts += [m.get("content", "") for m in messages if m.get("role") == "system"]
        messages = [m for m in messages if m.get("role") != "system"]
        body: dict[str, Any] = {
            "model": req.model,
            "max_tokens": req.max_tokens,
            "messages": messages,
        }
        if system_parts:
            body["system"] = "\n\n".join(system_parts)
        body["temperature"] = req.temperature
        if req.stop:
            body["stop_sequences"] = list(req.stop)
        body["stream"] = stream
        body.update(req.extra_body)
        headers = _base_headers(request_id, stream)
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if api_key:
            headers["x-api-key"] = api_key
        return HttpRequest("POST", self.path, headers, _encode_json(body))

    def new_stream_decoder(self) -> StreamDecoder:
        # input tokens come in message_start, output tokens in message_delta
        return _UsageMergingDecoder(_decode_anthropic_event)

    def decode_event(self, event: SSEEvent) -> list[StreamItem]:
        return _decode_anthropic_event(event)

    def decode_error_body(self, status: int, body: bytes) -> StreamError:
        return _decode_error_body(status, body)

    def decode_response(self, body: bytes) -> tuple[str, Usage]:
        obj = _parse_object(body)
        if obj.get("type") == "error":
            error = _error_from(obj.get("error"))
            raise ProtocolError(f"{self.name}: error in response: {error.error_type}")
        content = obj.get("content")
        if not isinstance(content, list):
            raise ProtocolError(f"{self.name}: response has no 'content' list")
        parts: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                raise ProtocolError(f"{self.name}: a content block is not an object")
            kind = block.get("type")
            if kind in ("text", "thinking"):
                text = _optional_str(block, str(kind), self.name)
                if text:
                    parts.append(text)
        usage = obj.get("usage")
        return "".join(parts), _anthropic_usage(usage) if usage is not None else Usage(None, None)


def _decode_anthropic_event(event: SSEEvent) -> list[StreamItem]:
    obj = _parse_object(event.data)
    kind = obj.get("type", event.event)
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            raise ProtocolError("anthropic: content_block_delta without a 'delta' object")
        delta_type = delta.get("type")
        key = _ANTHROPIC_DELTA_TEXT.get(delta_type) if isinstance(delta_type, str) else None
        if key is None:
            return []  # e.g. signature_delta: no generated tokens
        text = _optional_str(delta, key, "anthropic")
        return [ContentDelta(text)] if text else []
    if kind == "message_start":
        message = obj.get("message")
        if not isinstance(message, dict):
            raise ProtocolError("anthropic: message_start without a 'message' object")
        usage = message.get("usage")
        return [_anthropic_usage(usage)] if usage is not None else []
    if kind == "message_delta":
        usage = obj.get("usage")
        return [_anthropic_usage(usage)] if usage is not None else []
    if kind == "message_stop":
        return [Terminator()]
    if kind == "error":
        return [_error_from(obj.get("error"))]
    if not isinstance(kind, str):
        raise ProtocolError("anthropic: event without a 'type'")
    # ping, content_block_start/stop and event types added later: nothing to record
    return []


def _anthropic_usage(usage: object) -> Usage:
    if not isinstance(usage, dict):
        raise ProtocolError("anthropic: 'usage' is not an object")
    return Usage(
        _optional_count(usage, "input_tokens", "anthropic"),
        _optional_count(usage, "output_tokens", "anthropic"),
    )


# --- shared helpers -----------------------------------------------------------------
class _UsageMergingDecoder:
    """One stream's decoder: every `Usage` it yields carries the latest value of each
    count reported so far in the stream, so the last one is the stream's best answer."""

    __slots__ = ("_decode", "_input_tokens", "_output_tokens")

    def __init__(self, decode: Callable[[SSEEvent], list[StreamItem]]) -> None:
        self._decode = decode
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None

    def decode_event(self, event: SSEEvent) -> list[StreamItem]:
        items = self._decode(event)
        for i, item in enumerate(items):
            if isinstance(item, Usage):
                if item.input_tokens is not None:
                    self._input_tokens = item.input_tokens
                if item.output_tokens is not None:
                    self._output_tokens = item.output_tokens
                items[i] = Usage(self._input_tokens, self._output_tokens)
        return items


def _base_headers(request_id: str, stream: bool) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "text/event-stream" if stream else "application/json",
        "x-request-id": request_id,
    }


def _encode_json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _chat_messages(req: GenerationRequest) -> list[dict[str, str]]:
    if req.messages is not None:
        return [dict(m) for m in req.messages]
    return [{"role": "user", "content": req.prompt or ""}]


def _parse_object(data: str | bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and bad UTF-8 bytes
        raise ProtocolError(f"malformed JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _openai_error(obj: dict[str, Any]) -> StreamError | None:
    """vLLM/OpenAI errors: `{"error": {...}}`, or older vLLM `{"object": "error", ...}`."""
    error = obj.get("error")
    if error is not None:
        return _error_from(error)
    if obj.get("object") == "error":
        return _error_from(obj)
    return None


def _error_from(error: object) -> StreamError:
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


def _decode_error_body(status: int, body: bytes) -> StreamError:
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
        error = _error_from(obj["error"])
    elif "detail" in obj:  # FastAPI / Starlette
        detail = obj["detail"]
        error = _error_from(detail if isinstance(detail, str) else {"message": repr(detail)})
    else:  # older vLLM `{"object": "error", ...}` and other flat shapes
        error = _error_from(obj)
    return StreamError(
        error.error_type if error.error_type != "unknown" else fallback,
        error.message or _text_of(body),
    )


def _text_of(body: bytes) -> str:
    return truncate_message(body.decode("utf-8", "replace").strip()) or ""


def _openai_usage(usage: object) -> Usage:
    if not isinstance(usage, dict):
        raise ProtocolError("openai: 'usage' is not an object")
    return Usage(
        _optional_count(usage, "prompt_tokens", "openai"),
        _optional_count(usage, "completion_tokens", "openai"),
    )


def _optional_count(obj: dict[str, Any], key: str, api: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError(f"{api}: '{key}' is not a non-negative integer: {value!r}")
    return value


def _optional_str(obj: dict[str, Any], key: str, api: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError(f"{api}: '{key}' is not a string")


_ADAPTERS: Mapping[str, Callable[[], ApiAdapter]] = MappingProxyType(
    {
        OpenAIChatAdapter.name: OpenAIChatAdapter,
        OpenAICompletionsAdapter.name: OpenAICompletionsAdapter,
        AnthropicMessagesAdapter.name: AnthropicMessagesAdapter,
    }
)
API_NAMES: tuple[str, ...] = tuple(_ADAPTERS)
