"""The OpenAI Responses adapter: POST /v1/responses and its typed event stream.

The request: `input` (the chat history as Responses items: messages, an assistant's
tool calls as `function_call` items, their results as `function_call_output` items),
`max_output_tokens`, and tools as flat function tools (`{"type": "function", "name",
"parameters"}`). The stream: one `event:`/`data:` pair per typed event, each with a
`sequence_number`: `response.created`, `response.in_progress`,
`response.output_item.added` (a message, a reasoning item or a `function_call`), then
`response.output_text.delta`, `response.reasoning_text.delta` (vLLM's and OpenAI's raw
thinking; OpenAI's models stream `response.reasoning_summary_text.delta` instead) and
`response.function_call_arguments.delta` carrying the generated tokens, and the
terminal event with the whole response and its `usage` (`input_tokens`,
`output_tokens`, `input_tokens_details.cached_tokens`,
`output_tokens_details.reasoning_tokens`). There is no `[DONE]`: the terminal event is
the stream's end. `response.completed` ends it well; so does `response.incomplete`
for `max_output_tokens` (OpenAI's way to say what chat calls `finish_reason: length`;
vLLM sends `response.completed` with status `incomplete`); `response.incomplete` for
any other reason (`content_filter`), `response.failed` and an `error` event are
errors.
"""

from __future__ import annotations

from typing import Any

from zerohop.client.adapter_base import AdapterBase, EventDecoder, opened_tool_call
from zerohop.client.protocols import (
    ContentDelta,
    DecodedResponse,
    GenerationRequest,
    HttpRequest,
    ProtocolError,
    StreamError,
    StreamItem,
    Terminator,
    ToolCallPart,
    Usage,
)
from zerohop.client.sse import SSEEvent
from zerohop.client.wire_format import (
    chat_history,
    error_from,
    optional_count,
    optional_str,
    parse_object,
    with_images,
)
from zerohop.core.images import EncodedImage

__all__ = ["OpenAIResponsesAdapter", "responses_input", "responses_tools"]

_TEXT_DELTAS = {
    "response.output_text.delta": False,  # event type -> is it thinking
    "response.reasoning_text.delta": True,
    "response.reasoning_summary_text.delta": True,
}
_ENDS_WELL = "max_output_tokens"  # the one reason an incomplete response is a length stop


class OpenAIResponsesAdapter(AdapterBase):
    """POST /v1/responses with the Responses API's typed event stream."""

    name = "openai-responses"
    path = "/v1/responses"

    def build_request(
        self, req: GenerationRequest, *, api_key: str | None, request_id: str, stream: bool = True
    ) -> HttpRequest:
        messages = chat_history(req, self.name)
        body: dict[str, Any] = {
            "model": req.model,
            "input": with_images(responses_input(messages), req.images, _input_image,
                                 _input_text),
            "max_output_tokens": req.max_tokens,
            "temperature": req.temperature,
        }
        if req.stop:
            raise ValueError(f"stop: {self.name} has no stop sequences")
        if req.tools:
            body["tools"] = responses_tools(req.tools)
        if req.tool_choice is not None:
            body["tool_choice"] = req.tool_choice  # auto | required | none, as on chat
        if req.response_format is not None:
            body["text"] = {"format": {"type": "json_schema", **req.response_format}}
        body["stream"] = stream
        body["store"] = False  # a benchmark keeps no server-side state between requests
        if req.ignore_eos:
            body["ignore_eos"] = True  # vLLM's extension, as on chat
        own_headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        return self._post(body, req, request_id=request_id, stream=stream,
                          own_headers=own_headers)

    def _event_decoder(self) -> EventDecoder:
        return _decode_event

    def decode_response(self, body: bytes) -> DecodedResponse:
        obj = parse_object(body)
        if obj.get("error") is not None:
            raise ProtocolError(f"{self.name}: error in response: "
                                f"{error_from(obj['error']).error_type}")
        output = obj.get("output")
        if not isinstance(output, list):
            raise ProtocolError(f"{self.name}: response has no 'output' list")
        texts: list[str] = []
        calls = 0
        for item in output:
            if not isinstance(item, dict):
                raise ProtocolError(f"{self.name}: an output item is not an object")
            kind = item.get("type")
            if kind == "function_call":
                calls += 1
            elif kind in ("message", "reasoning"):
                texts.extend(_item_texts(item))
        usage = obj.get("usage")
        return DecodedResponse("".join(texts), _usage(usage) if usage is not None
                               else Usage(None, None), calls)


def responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chat-shaped history as Responses input items: an assistant's `tool_calls`
    become `function_call` items after its text, a `tool` message a
    `function_call_output`; every other message is copied as it is (role and content)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message.get("content") or ""})
            continue
        calls = message.get("tool_calls")
        if role == "assistant" and calls:
            if message.get("content"):
                items.append({"role": "assistant", "content": message["content"]})
            for call in calls:
                function = call["function"]
                items.append({"type": "function_call", "call_id": call["id"],
                              "name": function["name"],
                              "arguments": function.get("arguments") or ""})
        else:
            items.append(dict(message))
    return items


def _input_image(image: EncodedImage) -> dict[str, Any]:
    return {"type": "input_image", "image_url": image.data_url}


def _input_text(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}


def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat function tools (`{"type": "function", "function": {...}}`) as the
    Responses API's flat `{"type": "function", "name", "description", "parameters"}`;
    ValueError for an entry that is not a function tool."""
    converted = []
    for tool in tools:
        function = tool.get("function")
        if tool.get("type") != "function" or not isinstance(function, dict):
            raise ValueError(f"tools: not an OpenAI function tool definition: {tool!r}")
        entry: dict[str, Any] = {"type": "function", "name": function["name"]}
        if function.get("description") is not None:
            entry["description"] = function["description"]
        entry["parameters"] = dict(function.get("parameters") or
                                   {"type": "object", "properties": {}})
        converted.append(entry)
    return converted


def _decode_event(event: SSEEvent, parts: bool) -> list[StreamItem]:
    """One event's items; with `parts`, also the `ToolCallPart`s of a function call
    (its id and name when its item is added, each argument fragment)."""
    obj = parse_object(event.data)
    kind = obj.get("type", event.event)
    if not isinstance(kind, str):
        raise ProtocolError("openai-responses: event without a 'type'")
    thinking = _TEXT_DELTAS.get(kind)
    if thinking is not None:
        text = optional_str(obj, "delta", "openai-responses")
        if not text:
            return []
        # per-token logprobs (when asked for) are the only place that says how many
        # tokens a delta holds; the default `logprobs: []` says nothing
        logprobs = obj.get("logprobs")
        tokens = len(logprobs) if isinstance(logprobs, list) and logprobs else None
        return [ContentDelta(text, tokens, reasoning=thinking)]
    if kind == "response.function_call_arguments.delta":
        text = optional_str(obj, "delta", "openai-responses")
        if not text:
            return []
        if not parts:
            return [ContentDelta(text)]
        return [ContentDelta(text, tool_arguments=True),
                ToolCallPart(str(obj.get("output_index")), arguments=text)]
    if kind == "response.output_item.added":
        return _opened_call(obj, parts)
    if kind in ("response.completed", "response.incomplete", "response.failed"):
        return _terminal(kind, obj)
    if kind == "error":  # `{"type": "error", "code", "message", "param"}`: named by its code
        return [error_from({"code": obj.get("code"), "message": obj.get("message")})]
    return []  # created, in_progress, *.done, content_part.*: nothing generated


def _opened_call(obj: dict[str, Any], parts: bool) -> list[StreamItem]:
    item = obj.get("item")
    if not isinstance(item, dict) or item.get("type") != "function_call":
        return []
    return opened_tool_call(str(obj.get("output_index")), item.get("call_id"),
                            item.get("name"), parts)


def _terminal(kind: str, obj: dict[str, Any]) -> list[StreamItem]:
    """The terminal event's usage, then its end: a well-ended response's terminator, or
    the error a failed or cut response is."""
    response = obj.get("response")
    if not isinstance(response, dict):
        raise ProtocolError(f"openai-responses: {kind} without a 'response' object")
    usage = response.get("usage")
    items: list[StreamItem] = [_usage(usage)] if usage is not None else []
    if kind == "response.failed":
        error = response.get("error")
        items.append(error_from(error) if error is not None
                     else StreamError("response_failed", "the response failed"))
        return items
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if kind == "response.incomplete" and reason != _ENDS_WELL:
        items.append(StreamError(f"incomplete_{reason or 'unknown'}",
                                 f"the response is incomplete: {reason}"))
        return items
    items.append(Terminator())
    return items


def _usage(usage: object) -> Usage:
    if not isinstance(usage, dict):
        raise ProtocolError("openai-responses: 'usage' is not an object")
    inputs = usage.get("input_tokens_details")
    outputs = usage.get("output_tokens_details")
    return Usage(
        optional_count(usage, "input_tokens", "openai-responses"),
        optional_count(usage, "output_tokens", "openai-responses"),
        optional_count(outputs if isinstance(outputs, dict) else {}, "reasoning_tokens",
                       "openai-responses"),
        optional_count(inputs if isinstance(inputs, dict) else {}, "cached_tokens",
                       "openai-responses"),
    )


def _item_texts(item: dict[str, Any]) -> list[str]:
    """The text of a non-streamed message (`output_text` parts) or reasoning item
    (`reasoning_text` parts, or its summary)."""
    texts: list[str] = []
    for key in ("content", "summary"):
        entries = item.get(key)
        if not isinstance(entries, list):
            continue
        for part in entries:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and part.get("type") in (
                    "output_text", "reasoning_text", "summary_text"):
                texts.append(text)
    return texts
