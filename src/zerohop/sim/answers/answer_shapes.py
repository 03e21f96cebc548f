"""Wire shapes of answers that think first or call a tool (answer_plan.py), as bytes.

OpenAI chat, as vLLM with a reasoning parser and a tool parser sends it: thinking
tokens as `delta.reasoning_content`, then the answer's `delta.content`, or its tool
call: an entry opening the call (`id`, `type`, `index`, `function.name`, empty
`arguments`) sent with the first argument fragment, then one `function.arguments`
fragment per token; the call ends with `finish_reason: "tool_calls"`. Usage adds
`completion_tokens_details.reasoning_tokens` (OpenAI's field).

Anthropic: a `thinking` block (`thinking_delta` per token, closed by a
`signature_delta`), then block 1: `text`, or `tool_use` with `input_json_delta`
fragments and `stop_reason: "tool_use"`. Anthropic's usage has no thinking count.

A call's arguments are one JSON object with one string argument made of the answer's
words, closed by the last token; a stream cut short leaves them open, as a truncated
model would. A plain answer never comes here: `chat_shape` and `messages_shape` (the
shape functions the API entries name) give it api_shapes' shapes.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from zerohop.sim.answers.answer_plan import AnswerPlan
from zerohop.sim.answers.api_shapes import (
    ChatShape,
    CompletionShape,
    EventByIndex,
    MessagesShape,
    WireShape,
    _anthropic_usage,
    _j,
    _openai_usage,
    anthropic_stop_reason,
)
from zerohop.sim.answers.responses_shape import ResponsesShape
from zerohop.sim.answers.tokens import generated_text

_OPEN_TAIL = b'"logprobs":null,"finish_reason":null}]}\n\n'


def chat_shape(answer: AnswerPlan, *, request_id: str, model: str, include_usage: bool,
               prompt_tokens: int, cached_tokens: int | None, word_offset: int = 0,
               max_tokens: int = 0) -> WireShape:
    """The byte builders of one chat completions response (an API entry's shape: every
    entry's shape function takes these arguments)."""
    created = int(time.time())
    if answer.plain:
        return ChatShape(request_id, model, created, include_usage)
    return PlannedChatShape(request_id, model, created, include_usage, answer)


def completions_shape(answer: AnswerPlan, *, request_id: str, model: str,
                      include_usage: bool, prompt_tokens: int, cached_tokens: int | None,
                      word_offset: int = 0, max_tokens: int = 0) -> WireShape:
    """The byte builders of one completions response (its answers are always plain)."""
    return CompletionShape(request_id, model, int(time.time()), include_usage)


def responses_shape(answer: AnswerPlan, *, request_id: str, model: str,
                    include_usage: bool, prompt_tokens: int, cached_tokens: int | None,
                    word_offset: int = 0, max_tokens: int = 0) -> WireShape:
    """The byte builders of one Responses response."""
    return ResponsesShape(request_id, model, int(time.time()), answer, word_offset,
                          max_tokens)


def messages_shape(answer: AnswerPlan, *, request_id: str, model: str, include_usage: bool,
                   prompt_tokens: int, cached_tokens: int | None, word_offset: int = 0,
                   max_tokens: int = 0) -> WireShape:
    """The byte builders of one Anthropic messages response."""
    if answer.plain:
        return MessagesShape(request_id, model, prompt_tokens, cached_tokens)
    return PlannedMessagesShape(request_id, model, prompt_tokens, cached_tokens, answer)


def _escaped(text: str) -> bytes:
    """`text` as it appears inside a JSON string."""
    return _j(text)[1:-1]


class PlannedChatShape(ChatShape):
    """/v1/chat/completions for an answer that thinks first or calls a tool."""

    def __init__(
        self, request_id: str, model: str, created: int, include_usage: bool, answer: AnswerPlan
    ) -> None:
        super().__init__(request_id, model, created, include_usage)
        self.answer = answer
        choice = b"data: " + self._head + b',"choices":[{"index":0,"delta":'
        self._think_open = choice + b'{"reasoning_content":"'
        self.call_id = "chatcmpl-tool-" + request_id
        before, after = answer.argument_frame()
        self._args_before, self._args_after = _escaped(before), _escaped(after)
        self._args_open = choice + b'{"tool_calls":[{"index":0,"function":{"arguments":"'
        self._call_open = b""
        if answer.tool is not None:
            opening = {"id": self.call_id, "type": "function", "index": 0,
                       "function": {"name": answer.tool.name, "arguments": ""}}
            self._call_open = choice + _j({"tool_calls": [opening]}) + b"," + _OPEN_TAIL

    def token_frame(self) -> tuple[bytes, bytes] | None:
        return None  # thinking, then text or a tool call's arguments: framed by index

    def token_event(self, index: int, piece: bytes) -> bytes:
        if index < self.answer.reasoning:
            return self._think_open + piece + b'"},' + _OPEN_TAIL
        if self.answer.tool is None:
            return super().token_event(index, self._framed(index, piece, last=False))
        return self._call_fragment(index, piece, None)

    def last_token_event(self, index: int, piece: bytes, finish_reason: str) -> bytes:
        answer = self.answer
        if index < answer.reasoning:
            return self._think_open + piece + b'"},' + _finish(finish_reason)
        if answer.tool is None:
            return super().last_token_event(index, self._framed(index, piece, last=True),
                                            finish_reason)
        return self._call_fragment(index, piece, _tool_reason(finish_reason, "tool_calls"))

    def _framed(self, index: int, piece: bytes, *, last: bool) -> bytes:
        """A text answer's token with a structured answer's document around its words
        (the opening with the first answer token, the closing with the last)."""
        before = self._args_before if index == self.answer.reasoning else b""
        return before + piece + (self._args_after if last else b"")

    def _call_fragment(self, index: int, piece: bytes, finish_reason: str | None) -> bytes:
        first = index == self.answer.reasoning
        text = (self._args_before if first else b"") + piece
        if finish_reason is None:
            data = self._args_open + text + b'"}}]},' + _OPEN_TAIL
        else:
            data = self._args_open + text + self._args_after + b'"}}]},' + _finish(finish_reason)
        return self._call_open + data if first else data

    def final_body(
        self, text: str, prompt: int, completion: int, reason: str, cached: int | None = None
    ) -> bytes:
        answer = self.answer
        body, thought, said = _planned_body(
            super().final_body(text, prompt, completion, reason, cached), answer, text, completion)
        choice = body["choices"][0]
        message = choice["message"]
        message["reasoning_content"] = thought or None
        before, after = answer.argument_frame()
        framed = before + said + after if completion > answer.reasoning else said
        message["content"] = framed or None
        if answer.tool is not None and answer.tool_calls_in(completion):
            function = {"name": answer.tool.name, "arguments": before + said + after}
            message["content"] = None
            message["tool_calls"] = [{"id": self.call_id, "type": "function", "function": function}]
            choice["finish_reason"] = _tool_reason(reason, "tool_calls")
        body["usage"] = self._usage(prompt, completion, cached)
        return _j(body)

    def _usage(self, prompt: int, completion: int, cached: int | None) -> dict[str, object]:
        usage = _openai_usage(prompt, completion, cached)
        if self.answer.reasoning:
            details = {"reasoning_tokens": self.answer.reasoning_in(completion)}
            usage["completion_tokens_details"] = details
        return usage


class PlannedMessagesShape(EventByIndex, MessagesShape):
    """/v1/messages for an answer that thinks first or calls a tool."""

    def __init__(
        self,
        request_id: str,
        model: str,
        prompt_tokens: int,
        cached_tokens: int | None,
        answer: AnswerPlan,
    ) -> None:
        super().__init__(request_id, model, prompt_tokens, cached_tokens)
        self.answer = answer
        self.call_id = "toolu_" + request_id
        self.signature = base64.b64encode(f"zerohop-sim:{request_id}".encode()).decode()
        self._answer_index = 1 if answer.reasoning else 0
        before, after = answer.argument_frame()
        self._args_before, self._args_after = _escaped(before), _escaped(after)
        self._think = _delta_open(0) + b'"thinking_delta","thinking":"'
        kind = b'"input_json_delta","partial_json":"' if answer.tool else b'"text_delta","text":"'
        self._say = _delta_open(self._answer_index) + kind
        signature = {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "signature_delta", "signature": self.signature}}
        self._close_thinking = (b"event: content_block_delta\ndata: " + _j(signature) + b"\n\n"
                                + _block_stop(0))
        start = {"type": "content_block_start", "index": 1, "content_block": self._answer_block()}
        self._switch = self._close_thinking + (
            b"event: content_block_start\ndata: " + _j(start) + b"\n\n"
        )

    def first_block(self) -> dict[str, object]:
        if self.answer.reasoning:
            return {"type": "thinking", "thinking": "", "signature": ""}
        return self._answer_block()

    def _answer_block(self) -> dict[str, object]:
        tool = self.answer.tool
        if tool is None:
            return {"type": "text", "text": ""}
        return {"type": "tool_use", "id": self.call_id, "name": tool.name, "input": {}}

    def token_frame(self) -> tuple[bytes, bytes] | None:
        return None  # thinking, then text or a tool call's arguments: framed by index

    def _event(self, index: int, piece: bytes, *, last: bool) -> bytes:
        reasoning = self.answer.reasoning
        if index < reasoning:
            return self._think + piece + self._suffix
        first = index == reasoning
        if self.answer.tool is not None:
            piece = (self._args_before if first else b"") + piece
            piece += self._args_after if last else b""
        data = self._say + piece + self._suffix
        return self._switch + data if first and reasoning else data

    def tail_events(
        self, prompt: int, completion: int, reason: str, terminator: bool,
        cached: int | None = None,
    ) -> bytes:
        thinking = completion <= self.answer.reasoning
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": self._stop_reason(reason, completion), "stop_sequence": None},
            "usage": _anthropic_usage(prompt, completion, cached),
        }
        out = self._close_thinking if thinking else _block_stop(self._answer_index)
        out += b"event: message_delta\ndata: " + _j(delta) + b"\n\n"
        if terminator:
            out += b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
        return out

    def final_body(
        self, text: str, prompt: int, completion: int, reason: str, cached: int | None = None
    ) -> bytes:
        answer = self.answer
        body, thought, said = _planned_body(
            super().final_body(text, prompt, completion, reason, cached), answer, text, completion)
        content: list[dict[str, object]] = []
        if thought:
            content.append({"type": "thinking", "thinking": thought, "signature": self.signature})
        if answer.tool is not None and answer.tool_calls_in(completion):
            call: dict[str, object] = {"type": "tool_use", "id": self.call_id,
                                       "name": answer.tool.name,
                                       "input": {answer.tool.argument: said}}
            content.append(call)
        elif said or not thought:
            content.append({"type": "text", "text": said})
        body["content"] = content
        body["stop_reason"] = self._stop_reason(reason, completion)
        return _j(body)

    def _stop_reason(self, reason: str, completion: int) -> str:
        if self.answer.tool_calls_in(completion):
            return _tool_reason(anthropic_stop_reason(reason), "tool_use")
        return anthropic_stop_reason(reason)


def _planned_body(
    base: bytes, answer: AnswerPlan, text: str, completion: int
) -> tuple[dict[str, Any], str, str]:
    """The plain shape's body, the reasoning words the first `completion` tokens hold,
    and the text after them: both final bodies put the two in separate fields."""
    thought = generated_text(answer.word_offset, answer.reasoning_in(completion))
    return json.loads(base), thought, text[len(thought):]


def _tool_reason(reason: str, tool_reason: str) -> str:
    """A finished call ends the answer with the API's tool reason; a cut one does not."""
    return tool_reason if reason in ("stop", "end_turn") else reason


def _finish(finish_reason: str) -> bytes:
    return b'"logprobs":null,"finish_reason":' + _j(finish_reason) + b',"stop_reason":null}]}\n\n'


def _delta_open(index: int) -> bytes:
    return (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
            + str(index).encode() + b',"delta":{"type":')


def _block_stop(index: int) -> bytes:
    return (b'event: content_block_stop\ndata: {"type":"content_block_stop","index":'
            + str(index).encode() + b"}\n\n")
