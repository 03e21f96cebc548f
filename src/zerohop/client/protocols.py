"""The API adapter contract: what a workload asks for, the HTTP request an adapter
builds from it, and the typed items it decodes from a stream.

An adapter does two pure jobs at the edges of a request, so that a transport (Locust
user, benchmark client, test) never needs to know which API it is talking to:
`build_request` turns a `GenerationRequest` into method/path/headers/body, and a
per-stream decoder turns each `SSEEvent` into typed `StreamItem`s (content, usage,
in-stream error, terminator). Malformed or unexpected payloads raise `ProtocolError`,
which the caller records as the `protocol_error` outcome. Nothing here does I/O. The
adapters themselves live in `openai_adapters`, `anthropic_adapter` and `responses_adapter`;
`client.api_adapters.create_api_adapter` makes the one an API's entry names (`core.apis`).

Usage semantics: `Usage` fields are cumulative counts as the server last reported them;
`None` means "this event did not say". A stream decoder merges what earlier events of
the same stream said (Anthropic reports input tokens at the start and output tokens at
the end), so the last `Usage` a decoder yields is the stream's best answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from zerohop.client.sse import SSEEvent
from zerohop.core.apis import api_spec
from zerohop.core.images import EncodedImage
from zerohop.core.redaction import redact_headers

__all__ = [
    "ApiAdapter",
    "ContentDelta",
    "DecodedResponse",
    "GenerationRequest",
    "HttpRequest",
    "ProtocolError",
    "StreamDecoder",
    "StreamError",
    "StreamItem",
    "StreamedToolCall",
    "Terminator",
    "ToolCall",
    "ToolCallPart",
    "Usage",
    "api_key_from_env",
]


# --- stream items -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ContentDelta:
    """Generated content (answer text or reasoning). `tokens` only when the wire format
    says how many tokens the chunk holds (e.g. per-token logprobs); otherwise None.
    `reasoning` marks thinking (vLLM's `reasoning_content`, Anthropic's `thinking_delta`):
    it times the first token like any content, but not the first answer token.
    `tool_arguments` marks a tool call's argument text; only a decoder made with
    `tool_call_parts=True` marks it (timing and counting treat it as any content)."""

    text: str
    tokens: int | None = None
    reasoning: bool = False
    tool_arguments: bool = False


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The response opens a tool call. `key` tells the calls of one stream apart
    (OpenAI: choice and tool-call index; Anthropic: content-block index), so a server
    that repeats a call's opening still counts one call."""

    key: str


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """What one event says of a tool call, for a client that sends the call back (an
    agent loop): only a decoder made with `tool_call_parts=True` yields these. `key` is
    the call's (as in `ToolCall`); `call_id` and `name` where this event names them;
    `arguments`, a fragment of the call's argument text ("" when none)."""

    key: str
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class StreamedToolCall:
    """One tool call of a response, put together from its parts after the stream: its
    id and function name (None where the stream never said) and its argument text
    exactly as streamed."""

    call_id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Latest cumulative token counts the server reported; None = not reported.
    `reasoning_tokens`: the part of `output_tokens` spent thinking, where the API says
    (OpenAI's `completion_tokens_details.reasoning_tokens`). `cached_tokens`: the part of
    `input_tokens` the server's prefix cache served (OpenAI's
    `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`)."""

    input_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class StreamError:
    """An error the server sent inside a stream (or as an HTTP error body)."""

    error_type: str
    message: str


@dataclass(frozen=True, slots=True)
class Terminator:
    """The stream's explicit end: `data: [DONE]` or `message_stop`."""


StreamItem = ContentDelta | ToolCall | ToolCallPart | Usage | StreamError | Terminator


@dataclass(frozen=True, slots=True)
class DecodedResponse:
    """A non-streamed answer: its text (reasoning included), what usage said, and how
    many tool calls it asks for."""

    text: str
    usage: Usage
    tool_calls: int = 0


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
    # chat/messages, in the chat API's shape (an agent loop's assistant `tool_calls` and
    # `tool` results included: the Anthropic adapter converts them); built from prompt if None
    messages: list[dict[str, Any]] | None = None
    system: str | None = None
    # OpenAI function tool definitions offered to the model (the Anthropic adapter
    # converts them), and `auto` | `required` | `none`; chat and messages APIs only
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | None = None
    # a JSON schema the answer must follow: `{"name", "schema", "strict"}`, sent as chat's
    # `response_format.json_schema` or Responses' `text.format` (APIs that have one only)
    response_format: dict[str, Any] | None = None
    # images sent before the text of the last user message (APIs that take them only)
    images: tuple[EncodedImage, ...] = ()
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


# reprs end up in logs and tracebacks: say plainly that something was hidden
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
            f"headers={redact_headers(self.headers, _REDACTED)!r}, body={self.body!r})"
        )

    __str__ = __repr__


# --- the adapter contract -----------------------------------------------------------
class StreamDecoder(Protocol):
    """Decodes the events of ONE stream, keeping whatever state the API needs."""

    def decode_event(self, event: SSEEvent) -> list[StreamItem]: ...


class ApiAdapter(Protocol):
    name: str

    def build_request(
        self, req: GenerationRequest, *, api_key: str | None, request_id: str, stream: bool = True
    ) -> HttpRequest: ...

    def new_stream_decoder(self, *, tool_call_parts: bool = False) -> StreamDecoder:
        """A decoder for one stream; with `tool_call_parts` it also yields `ToolCallPart`s
        and marks tool-argument content (what an agent loop sends back)."""
        ...

    def decode_event(self, event: SSEEvent) -> list[StreamItem]:
        """Stateless decode of one event (no merging across events of a stream)."""
        ...

    def decode_error_body(self, status: int, body: bytes) -> StreamError: ...

    def decode_response(self, body: bytes) -> DecodedResponse: ...


def api_key_from_env(api: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """ZEROHOP_API_KEY first, then the API's usual variable. Empty values count as unset."""
    vendor_var = api_spec(api).key_env
    for var in ("ZEROHOP_API_KEY", vendor_var):
        value = environ.get(var)
        if value:
            return value
    return None
