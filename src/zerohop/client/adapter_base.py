"""What every shipped API adapter does the same way, written once.

An API's adapter (`openai_adapters`, `anthropic_adapter`, `responses_adapter`) writes its
own body and its own event decoding; the rest is common: the request's ending (the
workload's `extra_body` over the adapter's fields, the common headers plus the API's
own, JSON), the stream decoder that merges usage across events, the error-body
decoding, and how an opened tool call becomes stream items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from zerohop.client.protocols import (
    GenerationRequest,
    HttpRequest,
    StreamDecoder,
    StreamError,
    StreamItem,
    ToolCall,
    ToolCallPart,
)
from zerohop.client.sse import SSEEvent
from zerohop.client.wire_format import (
    UsageMergingDecoder,
    base_headers,
    decode_error_body,
    encode_json,
)

__all__ = ["AdapterBase", "EventDecoder", "opened_tool_call"]

# decode(event, parts): one event's items; with `parts`, also the `ToolCallPart`s an
# agent loop sends back
EventDecoder = Callable[[SSEEvent, bool], list[StreamItem]]


class AdapterBase:
    """The `ApiAdapter` methods all shipped APIs share; a subclass names its `path` and
    its event decoder (`_event_decoder`) and builds its body."""

    name: str = ""
    path: str = ""

    def _event_decoder(self) -> EventDecoder:
        """`decode(event, parts)`: asked once per stream, so it costs no event."""
        raise NotImplementedError

    def new_stream_decoder(self, *, tool_call_parts: bool = False) -> StreamDecoder:
        return UsageMergingDecoder(self._event_decoder(), tool_call_parts)

    def decode_event(self, event: SSEEvent) -> list[StreamItem]:
        return self._event_decoder()(event, False)

    def decode_error_body(self, status: int, body: bytes) -> StreamError:
        return decode_error_body(status, body)

    def _post(self, body: dict[str, Any], req: GenerationRequest, *, request_id: str,
              stream: bool, own_headers: Mapping[str, str]) -> HttpRequest:
        """The request: `body` with the workload's `extra_body` over it, the common
        headers and then the API's own (`own_headers`), POSTed to the API's path."""
        body.update(req.extra_body)
        headers = base_headers(request_id, stream)
        headers.update(own_headers)
        return HttpRequest("POST", self.path, headers, encode_json(body))


def opened_tool_call(key: str, call_id: object, name: object, parts: bool
                     ) -> list[StreamItem]:
    """A tool call opening at `key`; with `parts`, also its id and name (each None when
    the event's is not a string)."""
    opened: list[StreamItem] = [ToolCall(key)]
    if parts:
        opened.append(ToolCallPart(key, call_id if isinstance(call_id, str) else None,
                                   name if isinstance(name, str) else None))
    return opened
