"""The OpenAI Responses API's stream, as bytes, the way vLLM's /v1/responses sends it.

Each event is `event: TYPE` then `data: {...}` with a `sequence_number` that counts up
from 0 through the stream::

    response.created, response.in_progress                  (head_events)
    response.output_item.added, response.content_part.added (first_events: the first item)
    response.reasoning_text.delta ...                       (thinking, when it thinks)
    ...done events of the reasoning item, then the answer's item added
    response.output_text.delta ...   or   response.function_call_arguments.delta ...
    the answer item's done events, then response.completed with the response and usage

A response cut by `max_output_tokens` ends, as vLLM's does, with `response.completed`
whose status is `incomplete` (`incomplete_details.reason: max_output_tokens`); OpenAI
sends `response.incomplete` there, which the client takes the same way. There is no
`[DONE]`. Usage: `input_tokens`, `input_tokens_details.cached_tokens`, `output_tokens`,
`output_tokens_details.reasoning_tokens`, `total_tokens`.

The sequence number of every event is a function of the token's index (an answer that
thinks spends a fixed number of events on the switch to its answer), so each token's
bytes can be built in any order. The request's `input` is read as chat messages
(`responses_messages`) so that it is counted, tokenized and cached as chat's is.
"""

from __future__ import annotations

import json
from typing import Any

from zerohop.sim.answers.answer_plan import AnswerPlan
from zerohop.sim.answers.api_shapes import EventByIndex, _j
from zerohop.sim.answers.tokens import generated_text

_OPENING = 4  # created, in_progress, the first item's output_item.added and content_part


def responses_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A /v1/responses request's `instructions` and `input` as chat messages: a string
    input is one user message; message items keep role and content; a run of
    `function_call` items is one assistant message (as chat's `tool_calls` are), a
    `function_call_output` a tool message. ValueError on an input it cannot read."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        messages.append({"role": "system", "content": instructions})
    given = body.get("input")
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    if not isinstance(given, list) or not given:
        raise ValueError("`input` must be a string or a non-empty list of items")
    calling = False  # the last message is an assistant's, its calls being collected
    for item in given:
        if not isinstance(item, dict):
            raise ValueError("each input item must be an object")
        kind = item.get("type", "message")
        if kind == "function_call":
            if not calling:
                messages.append({"role": "assistant", "content": None})
            calling = True
            continue
        calling = False
        if kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "content": output if isinstance(output, str)
                             else json.dumps(output)})
        elif kind == "message":
            messages.append({"role": item.get("role", "user"), "content": item.get("content")})
            calling = item.get("role") == "assistant"
        else:
            raise ValueError(f"input item type {kind!r} is not supported by the sim")
    return messages


class ResponsesShape(EventByIndex):
    """Byte builders of one /v1/responses answer (see the module docstring)."""

    api = "responses"
    content_type = b"text/event-stream; charset=utf-8"

    def __init__(self, request_id: str, model: str, created: int, answer: AnswerPlan,
                 word_offset: int, max_output_tokens: int) -> None:
        self.answer = answer
        self.id = "resp_" + request_id
        self.model = model
        self.created = created
        self.word_offset = word_offset
        self.max_output_tokens = max_output_tokens
        self._reasoning_id = "rs_" + request_id
        self._message_id = "msg_" + request_id
        self._call_id = "fc_" + request_id
        self.call_id = "call_" + request_id
        tool = answer.tool
        self._answer_item = _j(self._item_open(tool is not None))
        # the switch from thinking to the answer: the reasoning item's three done events,
        # then the answer item's opening (a message also opens its content part)
        self._switch_events = 3 + (1 if tool is not None else 2)
        answer_index = 1 if answer.reasoning else 0
        self._answer_index = answer_index
        if tool is None:
            kind, ident = b"response.output_text.delta", self._message_id
            where = b',"content_index":0'
        else:
            kind, ident = b"response.function_call_arguments.delta", self._call_id
            where = b""
        self._say = (b"event: " + kind + b'\ndata: {"type":"' + kind + b'","item_id":'
                     + _j(ident) + b',"output_index":' + str(answer_index).encode() + where
                     + b',"delta":"')
        self._say_tail = b'","logprobs":[],"sequence_number":' if tool is None else \
            b'","sequence_number":'
        think = b"response.reasoning_text.delta"
        self._think = (b"event: " + think + b'\ndata: {"type":"' + think + b'","item_id":'
                       + _j(self._reasoning_id)
                       + b',"output_index":0,"content_index":0,"delta":"')
        before, after = answer.argument_frame()  # a call's arguments, a structured answer
        self._frame = before, after
        self._args_before, self._args_after = _j(before)[1:-1], _j(after)[1:-1]

    # --- the events ------------------------------------------------------------------
    def head_events(self) -> bytes:
        response = self._response("in_progress", [], None)
        return (_event("response.created", {"response": response}, 0)
                + _event("response.in_progress", {"response": response}, 1))

    def first_events(self) -> bytes:
        if self.answer.reasoning:
            item = {"id": self._reasoning_id, "type": "reasoning", "summary": [],
                    "content": [], "status": "in_progress"}
            return (_event("response.output_item.added", {"output_index": 0, "item": item}, 2)
                    + _event("response.content_part.added", {
                        "item_id": self._reasoning_id, "output_index": 0, "content_index": 0,
                        "part": {"type": "reasoning_text", "text": ""}}, 3))
        return self._open_answer(2)

    def token_frame(self) -> tuple[bytes, bytes] | None:
        return None  # every event carries its own sequence number

    def _event(self, index: int, piece: bytes, *, last: bool) -> bytes:
        reasoning = self.answer.reasoning
        seq = str(self._seq_of(index)).encode() + b"}\n\n"
        if index < reasoning:
            return self._think + piece + b'","sequence_number":' + seq
        first = index == reasoning
        piece = (self._args_before if first else b"") + piece
        piece += self._args_after if last else b""
        data = self._say + piece + self._say_tail + seq
        if first and reasoning:
            return self._close_reasoning(_OPENING + reasoning, reasoning) + \
                self._open_answer(_OPENING + reasoning + 3) + data
        return data

    def _seq_of(self, index: int) -> int:
        """The sequence number of token `index`'s delta event."""
        reasoning = self.answer.reasoning
        switch = self._switch_events if reasoning and index >= reasoning else 0
        return _OPENING + index + switch

    def tail_events(self, prompt: int, completion: int, reason: str, terminator: bool,
                    cached: int | None = None) -> bytes:
        seq = self._seq_of(completion - 1) + 1 if completion else _OPENING
        thought, said = self._texts(completion)
        if completion <= self.answer.reasoning:
            out = self._close_reasoning(seq, completion)
            seq += 3
        else:
            out, seq = self._close_answer(seq, said)
        if terminator:
            response = self._response(
                "incomplete" if reason == "length" else "completed",
                self._output(thought, said, completion),
                self._usage(prompt, completion, cached))
            out += _event("response.completed", {"response": response}, seq)
        return out

    def error_event(self, error_type: str, message: str) -> bytes:
        return _event("error", {"code": error_type, "message": message, "param": None}, 0)

    def invalid_json_event(self) -> bytes:
        return self._say + b" bro\n\n"

    def final_body(self, text: str, prompt: int, completion: int, reason: str,
                   cached: int | None = None) -> bytes:
        thought, said = self._texts(completion)
        return _j(self._response("incomplete" if reason == "length" else "completed",
                                 self._output(thought, said, completion),
                                 self._usage(prompt, completion, cached)))

    # --- pieces ----------------------------------------------------------------------
    def _open_answer(self, seq: int) -> bytes:
        index = self._answer_index
        item = json.loads(self._answer_item)
        out = _event("response.output_item.added", {"output_index": index, "item": item}, seq)
        if self.answer.tool is None:
            out += _event("response.content_part.added", {
                "item_id": self._message_id, "output_index": index, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}, seq + 1)
        return out

    def _close_reasoning(self, seq: int, completion: int) -> bytes:
        thought = generated_text(self.word_offset, self.answer.reasoning_in(completion))
        where = {"item_id": self._reasoning_id, "output_index": 0, "content_index": 0}
        part = {"type": "reasoning_text", "text": thought}
        return (_event("response.reasoning_text.done", {**where, "text": thought}, seq)
                + _event("response.content_part.done", {**where, "part": part}, seq + 1)
                + _event("response.output_item.done", {
                    "output_index": 0, "item": self._reasoning_item(thought)}, seq + 2))

    def _close_answer(self, seq: int, said: str) -> tuple[bytes, int]:
        index = self._answer_index
        item = self._answer_done(said)
        if self.answer.tool is not None:
            out = _event("response.function_call_arguments.done", {
                "item_id": self._call_id, "output_index": index, "name": self.answer.tool.name,
                "arguments": item["arguments"]}, seq)
            return out + _event("response.output_item.done",
                                {"output_index": index, "item": item}, seq + 1), seq + 2
        where = {"item_id": self._message_id, "output_index": index, "content_index": 0}
        part = item["content"][0]
        out = (_event("response.output_text.done", {**where, "text": said, "logprobs": []}, seq)
               + _event("response.content_part.done", {**where, "part": part}, seq + 1)
               + _event("response.output_item.done", {"output_index": index, "item": item},
                        seq + 2))
        return out, seq + 3

    def _texts(self, completion: int) -> tuple[str, str]:
        """The thinking and the answer (framed: a call's arguments, a structured
        document) of the first `completion` tokens."""
        thinking = self.answer.reasoning_in(completion)
        text = generated_text(self.word_offset, completion)
        thought = generated_text(self.word_offset, thinking)
        if completion <= thinking:
            return thought, ""
        before, after = self._frame
        return thought, before + text[len(thought):] + after

    def _item_open(self, call: bool) -> dict[str, Any]:
        if call and self.answer.tool is not None:
            return {"id": self._call_id, "type": "function_call", "status": "in_progress",
                    "call_id": self.call_id, "name": self.answer.tool.name, "arguments": ""}
        return {"id": self._message_id, "type": "message", "status": "in_progress",
                "role": "assistant", "content": []}

    def _answer_done(self, said: str) -> dict[str, Any]:
        item = self._item_open(self.answer.tool is not None)
        item["status"] = "completed"
        if self.answer.tool is not None:
            item["arguments"] = said
        else:
            item["content"] = [{"type": "output_text", "text": said, "annotations": [],
                                "logprobs": []}]
        return item

    def _reasoning_item(self, thought: str) -> dict[str, Any]:
        return {"id": self._reasoning_id, "type": "reasoning", "summary": [], "status":
                "completed", "content": [{"type": "reasoning_text", "text": thought}]}

    def _output(self, thought: str, said: str, completion: int) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = []
        if self.answer.reasoning:
            output.append(self._reasoning_item(thought))
        if completion > self.answer.reasoning or not self.answer.reasoning:
            output.append(self._answer_done(said))
        return output

    def _usage(self, prompt: int, completion: int, cached: int | None) -> dict[str, Any]:
        return {"input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached or 0},
                "output_tokens": completion,
                "output_tokens_details": {
                    "reasoning_tokens": self.answer.reasoning_in(completion)},
                "total_tokens": prompt + completion}

    def _response(self, status: str, output: list[dict[str, Any]],
                  usage: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": self.id, "object": "response", "created_at": self.created,
            "status": status, "model": self.model, "output": output,
            "error": None,
            "incomplete_details": ({"reason": "max_output_tokens"}
                                   if status == "incomplete" else None),
            "instructions": None, "metadata": {}, "parallel_tool_calls": True,
            "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": [],
            "max_output_tokens": self.max_output_tokens, "text": {"format": {"type": "text"}},
            "truncation": "disabled", "usage": usage,
        }


def _event(kind: str, fields: dict[str, Any], seq: int) -> bytes:
    data = {"type": kind, **fields, "sequence_number": seq}
    return b"event: " + kind.encode() + b"\ndata: " + _j(data) + b"\n\n"

