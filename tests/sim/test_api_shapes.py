"""Byte-level shapes: every SSE event parses as the API defines it."""

from __future__ import annotations

import json

import pytest

from zerohop.sim.answers.api_shapes import ChatShape, CompletionShape, MessagesShape, error_body

pytestmark = pytest.mark.unit


def data_lines(raw: bytes) -> list[str]:
    return [line[len("data: ") :] for line in raw.decode().split("\n") if line.startswith("data: ")]


def test_chat_stream_events_are_vllm_shaped() -> None:
    shape = ChatShape("abc", "m/x", 1700000000, include_usage=True)
    role = json.loads(data_lines(shape.first_events())[0])
    assert role["object"] == "chat.completion.chunk"
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    token = json.loads(data_lines(shape.token_event(0, b" hello"))[0])
    assert token["choices"][0]["delta"] == {"content": " hello"}
    assert token["choices"][0]["finish_reason"] is None
    last = json.loads(data_lines(shape.last_token_event(1, b" bye", "length"))[0])
    assert last["choices"][0]["finish_reason"] == "length"
    tail = data_lines(shape.tail_events(12, 3, "length", True))
    usage = json.loads(tail[0])
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": 12,
        "total_tokens": 15,
        "completion_tokens": 3,
    }
    assert tail[1] == "[DONE]"
    assert "[DONE]" not in "".join(data_lines(shape.tail_events(12, 3, "length", False)))


def test_completion_stream_and_body() -> None:
    shape = CompletionShape("abc", "m", 1, include_usage=False)
    event = json.loads(data_lines(shape.token_event(0, b" a"))[0])
    assert event["object"] == "text_completion" and event["choices"][0]["text"] == " a"
    assert data_lines(shape.tail_events(1, 1, "stop", True)) == ["[DONE]"]
    body = json.loads(shape.final_body(" a b", 3, 2, "stop"))
    assert body["choices"][0]["text"] == " a b" and body["usage"]["completion_tokens"] == 2


def test_messages_stream_sequence() -> None:
    shape = MessagesShape("abc", "claude-x", prompt_tokens=9)
    raw = shape.head_events() + shape.token_event(0, b" hi")
    raw += shape.tail_events(9, 1, "length", True)
    events = [block for block in raw.decode().split("\n\n") if block]
    names = [e.split("\n")[0].removeprefix("event: ") for e in events]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    payloads = [json.loads(e.split("\n")[1].removeprefix("data: ")) for e in events]
    assert payloads[0]["message"]["usage"]["input_tokens"] == 9
    assert payloads[3]["delta"] == {"type": "text_delta", "text": " hi"}
    assert payloads[5]["delta"]["stop_reason"] == "max_tokens"
    assert payloads[5]["usage"]["output_tokens"] == 1


def test_invalid_json_event_is_really_invalid() -> None:
    for shape in (
        ChatShape("a", "m", 1, False),
        CompletionShape("a", "m", 1, False),
        MessagesShape("a", "m", 1),
    ):
        line = next(
            ln for ln in shape.invalid_json_event().decode().split("\n") if ln.startswith("data: ")
        )
        with pytest.raises(json.JSONDecodeError):
            json.loads(line.removeprefix("data: "))


def test_error_bodies() -> None:
    openai = json.loads(error_body("chat", 503, "busy"))
    assert openai["error"] == {
        "message": "busy",
        "type": "ServiceUnavailableError",
        "param": None,
        "code": 503,
    }
    anthropic = json.loads(error_body("messages", 529, "busy"))
    assert anthropic == {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
