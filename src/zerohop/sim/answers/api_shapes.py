"""Wire formats of OpenAI chat, OpenAI completions and Anthropic messages, as bytes,
exactly as vLLM and Anthropic send them; also every API's error body and /v1/models.
OpenAI Responses' stream is `responses_shape.py`; an API registered at run time brings
its own (`ApiEntry.embedded_shape`).

Per request a `WireShape` pre-encodes everything that does not change between tokens
(ids, model name, JSON scaffolding), so emitting a token is two byte concatenations —
no json.dumps on the hot path. The generated words are plain ASCII (tokens.WORDS), so
they need no JSON escaping.

OpenAI-compatible (vLLM) streaming, chat::

    data: {"id":...,"object":"chat.completion.chunk",...,"delta":{"role":"assistant",...}}
    data: {... "delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}
    ...                                  (the last token's chunk carries finish_reason)
    data: {... "choices":[],"usage":{...}}   (stream_options.include_usage only)
    data: [DONE]

Anthropic streaming: message_start, content_block_start, ping, content_block_delta per
token, content_block_stop, message_delta (stop_reason + cumulative usage), message_stop.

Token builders take the token's index in the answer: an answer that thinks first or
calls a tool (answer_plan.py) frames its tokens by where they fall (answer_shapes.py).

Usage says what the prefix cache gave: `prompt_tokens_details.cached_tokens` (OpenAI),
`cache_read_input_tokens` (Anthropic: message_start reports what was cached when the
request arrived, message_delta and the body what the scheduler really reused).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from zerohop.sim.answers.answer_plan import PLAIN_ANSWER, AnswerPlan
from zerohop.sim.answers.body_forms import body_form

OPENAI_ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    413: "RequestTooLargeError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
}
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
    503: "overloaded_error",
}


def _j(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class WireShape(Protocol):
    """Byte builders for one request's response (see the module docstring)."""

    api: str
    content_type: bytes

    def head_events(self) -> bytes: ...

    def first_events(self) -> bytes: ...

    answer: AnswerPlan  # what the answer holds: thinking first, a tool call

    def token_event(self, index: int, piece: bytes) -> bytes: ...

    def token_frame(self) -> tuple[bytes, bytes] | None:
        """(head, tail) when every token but the first and the last is `head + word +
        tail` (token_event's bytes, framed once per stream); None when the frame
        depends on the token's index."""
        ...

    def last_token_event(self, index: int, piece: bytes, finish_reason: str) -> bytes: ...

    def tail_events(
        self, prompt: int, completion: int, reason: str, terminator: bool,
        cached: int | None = None,
    ) -> bytes: ...

    def error_event(self, error_type: str, message: str) -> bytes: ...

    def invalid_json_event(self) -> bytes: ...

    def final_body(
        self, text: str, prompt: int, completion: int, reason: str, cached: int | None = None
    ) -> bytes: ...


class EventByIndex:
    """For a shape whose every token event, the last one included, is built by
    `_event(index, piece, last=...)`: the last only closes what the answer opened."""

    def _event(self, index: int, piece: bytes, *, last: bool) -> bytes:
        raise NotImplementedError

    def token_event(self, index: int, piece: bytes) -> bytes:
        return self._event(index, piece, last=False)

    def last_token_event(self, index: int, piece: bytes, finish_reason: str) -> bytes:
        return self._event(index, piece, last=True)


def error_body(api: str, status: int, message: str, error_type: str | None = None) -> bytes:
    """The JSON body of an HTTP error, in the shape of body form `api`'s errors."""
    if body_form(api).error_style == "anthropic":
        kind = error_type or ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return _j({"type": "error", "error": {"type": kind, "message": message}})
    kind = error_type or OPENAI_ERROR_TYPES.get(status, "InternalServerError")
    return _j({"error": {"message": message, "type": kind, "param": None, "code": status}})


class _OpenAIStreamShape:
    """What vLLM's chat and completions streams share: the chunk head, one chunk per
    token from a pre-encoded prefix and suffix, the usage chunk, `[DONE]`, the in-stream
    error. Subclasses name the id prefix, the object and the token's JSON frame."""

    api = ""
    content_type = b"text/event-stream; charset=utf-8"
    id_prefix = ""
    chunk_object = ""
    token_open = b""  # after `"choices":[{"index":0,`, before the token text
    token_close = b""  # after the token text, to the end of the event
    piece_end = b""  # after the last token's text, before its "logprobs"

    def __init__(self, request_id: str, model: str, created: int, include_usage: bool) -> None:
        self.id = self.id_prefix + request_id
        self.model = model
        self.created = created
        self.include_usage = include_usage
        head = b'{"id":' + _j(self.id) + b',"object":' + _j(self.chunk_object) + b',"created":'
        self._head = head + str(created).encode() + b',"model":' + _j(model)
        self._prefix = b"data: " + self._head + b',"choices":[{"index":0,' + self.token_open
        self._suffix = self.token_close

    def head_events(self) -> bytes:
        return b""

    answer = PLAIN_ANSWER

    def token_event(self, index: int, piece: bytes) -> bytes:
        return self._prefix + piece + self._suffix

    def token_frame(self) -> tuple[bytes, bytes] | None:
        return self._prefix, self._suffix

    def last_token_event(self, index: int, piece: bytes, finish_reason: str) -> bytes:
        return (self._prefix + piece + self.piece_end + b'"logprobs":null,"finish_reason":'
                + _j(finish_reason) + b',"stop_reason":null}]}\n\n')

    def tail_events(
        self, prompt: int, completion: int, reason: str, terminator: bool,
        cached: int | None = None,
    ) -> bytes:
        out = b""
        if self.include_usage:
            usage = _j(self._usage(prompt, completion, cached))
            out += b"data: " + self._head + b',"choices":[],"usage":' + usage + b"}\n\n"
        if terminator:
            out += b"data: [DONE]\n\n"
        return out

    def _usage(self, prompt: int, completion: int, cached: int | None) -> dict[str, object]:
        """The usage chunk's object; a shape whose answer reasons adds its details."""
        return _openai_usage(prompt, completion, cached)

    def error_event(self, error_type: str, message: str) -> bytes:
        body = _j({"error": {"message": message, "type": error_type, "param": None, "code": 500}})
        return b"data: " + body + b"\n\ndata: [DONE]\n\n"

    def invalid_json_event(self) -> bytes:
        """A token chunk cut off inside its text: not JSON."""
        return self._prefix + b" bro\n\n"


class ChatShape(_OpenAIStreamShape):
    api = "chat"
    id_prefix = "chatcmpl-"
    chunk_object = "chat.completion.chunk"
    token_open = b'"delta":{"content":"'
    piece_end = b'"},'
    token_close = b'"},"logprobs":null,"finish_reason":null}]}\n\n'

    def first_events(self) -> bytes:
        return (
            b"data: " + self._head + b',"choices":[{"index":0,"delta":{"role":"assistant",'
            b'"content":""},"logprobs":null,"finish_reason":null}]}\n\n'
        )

    def final_body(
        self, text: str, prompt: int, completion: int, reason: str, cached: int | None = None
    ) -> bytes:
        return _j(
            {
                "id": self.id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": text,
                            "refusal": None,
                            "tool_calls": [],
                        },
                        "logprobs": None,
                        "finish_reason": reason,
                        "stop_reason": None,
                    }
                ],
                "usage": _openai_usage(prompt, completion, cached),
                "prompt_logprobs": None,
            }
        )


class CompletionShape(_OpenAIStreamShape):
    api = "completions"
    id_prefix = "cmpl-"
    chunk_object = "text_completion"
    token_open = b'"text":"'
    piece_end = b'",'
    token_close = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'

    def first_events(self) -> bytes:
        return b""

    def final_body(
        self, text: str, prompt: int, completion: int, reason: str, cached: int | None = None
    ) -> bytes:
        return _j(
            {
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "text": text,
                        "logprobs": None,
                        "finish_reason": reason,
                        "stop_reason": None,
                        "prompt_logprobs": None,
                    }
                ],
                "usage": _openai_usage(prompt, completion, cached),
            }
        )


class MessagesShape:
    api = "messages"
    answer = PLAIN_ANSWER
    content_type = b"text/event-stream; charset=utf-8"

    def __init__(
        self, request_id: str, model: str, prompt_tokens: int, cached_tokens: int | None = None
    ) -> None:
        self.id = "msg_" + request_id
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = cached_tokens  # what the cache holds at the request's start
        self._prefix = (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"'
        )
        self._suffix = b'"}}\n\n'

    def head_events(self) -> bytes:
        start = {
            "type": "message_start",
            "message": {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _anthropic_usage(self.prompt_tokens, 1, self.cached_tokens),
            },
        }
        block = {"type": "content_block_start", "index": 0, "content_block": self.first_block()}
        return (
            b"event: message_start\ndata: " + _j(start) + b"\n\n"
            b"event: content_block_start\ndata: " + _j(block) + b"\n\n"
            b'event: ping\ndata: {"type":"ping"}\n\n'
        )

    def first_block(self) -> dict[str, Any]:
        """The content block message_start opens: the answer's text."""
        return {"type": "text", "text": ""}

    def first_events(self) -> bytes:
        return b""

    def token_event(self, index: int, piece: bytes) -> bytes:
        return self._prefix + piece + self._suffix

    def token_frame(self) -> tuple[bytes, bytes] | None:
        return self._prefix, self._suffix

    def last_token_event(self, index: int, piece: bytes, finish_reason: str) -> bytes:
        return self._prefix + piece + self._suffix

    def tail_events(
        self, prompt: int, completion: int, reason: str, terminator: bool,
        cached: int | None = None,
    ) -> bytes:
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": anthropic_stop_reason(reason), "stop_sequence": None},
            "usage": _anthropic_usage(prompt, completion, cached),
        }
        out = (
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
            b"event: message_delta\ndata: " + _j(delta) + b"\n\n"
        )
        if terminator:
            out += b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
        return out

    def error_event(self, error_type: str, message: str) -> bytes:
        body = _j({"type": "error", "error": {"type": error_type, "message": message}})
        return b"event: error\ndata: " + body + b"\n\n"

    def invalid_json_event(self) -> bytes:
        return self._prefix + b" bro\n\n"

    def final_body(
        self, text: str, prompt: int, completion: int, reason: str, cached: int | None = None
    ) -> bytes:
        return _j(
            {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": anthropic_stop_reason(reason),
                "stop_sequence": None,
                "usage": _anthropic_usage(prompt, completion, cached),
            }
        )


def anthropic_stop_reason(reason: str) -> str:
    return "max_tokens" if reason == "length" else "end_turn"


def _openai_usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }
    if cached is not None:  # the prompt tokens the prefix cache gave
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def _anthropic_usage(prompt: int, completion: int, cached: int | None) -> dict[str, int]:
    usage = {"input_tokens": prompt, "output_tokens": completion}
    if cached is not None:
        usage["cache_read_input_tokens"] = cached
    return usage


def models_body(entries: list[tuple[str, str | None, int]], created: int) -> bytes:
    """`/v1/models` like vLLM: base models (parent None) and LoRA adapters."""
    data = []
    for name, parent, max_len in entries:
        data.append(
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": name,
                "parent": parent,
                "max_model_len": max_len,
                "permission": [],
            }
        )
    return _j({"object": "list", "data": data})
