"""The Anthropic messages adapter: POST /v1/messages and its typed event stream.

Anthropic reports input tokens in `message_start` and output tokens in `message_delta`;
the stream decoder merges the two, so its last `Usage` holds both. Extended thinking
arrives as a `thinking` block (`thinking_delta`, then a `signature_delta` that holds no
generated text); a tool call as a `tool_use` block whose `input_json_delta` fragments are
its generated arguments. Anthropic's usage does not split out the thinking tokens.
Tools and a tool-calling history arrive in the chat API's shape and are converted
(`tool_messages`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from zerohop.client.adapter_base import AdapterBase, EventDecoder, opened_tool_call
from zerohop.client.protocols import (
    ContentDelta,
    DecodedResponse,
    GenerationRequest,
    HttpRequest,
    ProtocolError,
    StreamItem,
    Terminator,
    ToolCallPart,
    Usage,
)
from zerohop.client.sse import SSEEvent
from zerohop.client.tool_messages import (
    anthropic_messages,
    anthropic_tool_choice,
    anthropic_tools,
)
from zerohop.client.wire_format import (
    chat_history,
    error_from,
    optional_count,
    optional_str,
    parse_object,
    with_images,
)
from zerohop.core.images import EncodedImage

__all__ = ["ANTHROPIC_VERSION", "AnthropicMessagesAdapter"]

ANTHROPIC_VERSION = "2023-06-01"

# content_block_delta kinds that carry generated tokens, and the field holding them
_DELTA_TEXT = MappingProxyType(
    {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
)


class AnthropicMessagesAdapter(AdapterBase):
    """POST /v1/messages with Anthropic's typed event stream."""

    name = "anthropic"
    path = "/v1/messages"

    def build_request(
        self, req: GenerationRequest, *, api_key: str | None, request_id: str, stream: bool = True
    ) -> HttpRequest:
        messages = anthropic_messages(chat_history(req, self.name))
        if req.response_format is not None:
            raise ValueError(f"response_format: {self.name} takes no JSON schema")
        # Anthropic takes the system prompt (and any system message) as a field
        system_parts = [m.get("content", "") for m in messages if m.get("role") == "system"]
        messages = with_images([m for m in messages if m.get("role") != "system"],
                               req.images, _image_block, _text_block)
        body: dict[str, Any] = {
            "model": req.model,
            "max_tokens": req.max_tokens,
            "messages": messages,
        }
        if system_parts:
            body["system"] = "\n\n".join(system_parts)
        body["temperature"] = req.temperature
        if req.tools:
            body["tools"] = anthropic_tools(req.tools)
        if req.tool_choice is not None:
            body["tool_choice"] = anthropic_tool_choice(req.tool_choice)
        if req.stop:
            body["stop_sequences"] = list(req.stop)
        body["stream"] = stream
        own_headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            own_headers["x-api-key"] = api_key
        return self._post(body, req, request_id=request_id, stream=stream,
                          own_headers=own_headers)

    def _event_decoder(self) -> EventDecoder:
        # input tokens come in message_start, output tokens in message_delta: the stream
        # decoder merges the two
        return _decode_event

    def decode_response(self, body: bytes) -> DecodedResponse:
        obj = parse_object(body)
        if obj.get("type") == "error":
            error = error_from(obj.get("error"))
            raise ProtocolError(f"{self.name}: error in response: {error.error_type}")
        content = obj.get("content")
        if not isinstance(content, list):
            raise ProtocolError(f"{self.name}: response has no 'content' list")
        parts: list[str] = []
        tool_calls = 0
        for block in content:
            if not isinstance(block, dict):
                raise ProtocolError(f"{self.name}: a content block is not an object")
            kind = block.get("type")
            if kind in ("text", "thinking"):
                text = optional_str(block, str(kind), self.name)
                if text:
                    parts.append(text)
            elif kind == "tool_use":
                tool_calls += 1
        usage = obj.get("usage")
        usage_counts = _usage(usage) if usage is not None else Usage(None, None)
        return DecodedResponse("".join(parts), usage_counts, tool_calls)


def _image_block(image: EncodedImage) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                        "data": image.data_b64}}


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _decode_event(event: SSEEvent, parts: bool) -> list[StreamItem]:
    """One event's items; with `parts`, also the `ToolCallPart`s of a tool_use block
    (its id and name when it starts, each argument fragment) and the mark on its
    argument content."""
    obj = parse_object(event.data)
    kind = obj.get("type", event.event)
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            raise ProtocolError("anthropic: content_block_delta without a 'delta' object")
        delta_type = delta.get("type")
        key = _DELTA_TEXT.get(delta_type) if isinstance(delta_type, str) else None
        if key is None:
            return []  # e.g. signature_delta: no generated tokens
        text = optional_str(delta, key, "anthropic")
        if not text:
            return []
        if delta_type != "input_json_delta" or not parts:
            return [ContentDelta(text, reasoning=delta_type == "thinking_delta")]
        return [ContentDelta(text, tool_arguments=True),
                ToolCallPart(str(obj.get("index")), arguments=text)]
    if kind == "content_block_start":
        block = obj.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return opened_tool_call(str(obj.get("index")), block.get("id"), block.get("name"),
                                    parts)
        return []
    if kind == "message_start":
        message = obj.get("message")
        if not isinstance(message, dict):
            raise ProtocolError("anthropic: message_start without a 'message' object")
        usage = message.get("usage")
        return [_usage(usage)] if usage is not None else []
    if kind == "message_delta":
        usage = obj.get("usage")
        return [_usage(usage)] if usage is not None else []
    if kind == "message_stop":
        return [Terminator()]
    if kind == "error":
        return [error_from(obj.get("error"))]
    if not isinstance(kind, str):
        raise ProtocolError("anthropic: event without a 'type'")
    # ping, content_block_stop and event types added later: nothing to record
    return []


def _usage(usage: object) -> Usage:
    if not isinstance(usage, dict):
        raise ProtocolError("anthropic: 'usage' is not an object")
    return Usage(
        optional_count(usage, "input_tokens", "anthropic"),
        optional_count(usage, "output_tokens", "anthropic"),
        cached_tokens=optional_count(usage, "cache_read_input_tokens", "anthropic"),
    )
