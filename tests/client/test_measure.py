"""RequestRecord derivation from timestamped reads: the metric definitions."""

from __future__ import annotations

import json

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import END_COMPLETE, END_EOF, END_STALL, RawExchange
from zerohop.client.measure import build_record
from zerohop.core import records as rec
from zerohop.core.records import ClockAnchor, RequestRecord

pytestmark = pytest.mark.unit
MS = 1_000_000
ANCHOR = ClockAnchor(wall_ns=1_700_000_000 * 10**9, perf_ns=0)


def chat_chunk(text: str | None = None, *, role: bool = False) -> bytes:
    delta: dict[str, str] = {"role": "assistant"} if role else {}
    if text is not None:
        delta["content"] = text
    obj = {"id": "x", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def usage_chunk(prompt: int, completion: int) -> bytes:
    obj = {"id": "x", "choices": [], "usage": {"prompt_tokens": prompt,
           "completion_tokens": completion, "total_tokens": prompt + completion}}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def new_record() -> RequestRecord:
    return RequestRecord(request_id="r1", workload="w", api="openai-chat", model="m")


def test_ok_stream_metrics() -> None:
    # sent at 0; role chunk at 5 ms (not content); tokens at 20, 30, 45 ms; usage; done
    reads = [
        (5 * MS, chat_chunk(role=True)),
        (20 * MS, chat_chunk("a")),
        (30 * MS, chat_chunk("b")),
        (45 * MS, chat_chunk("c") + usage_chunk(100, 3) + b"data: [DONE]\n\n"),
    ]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=46 * MS, end=END_COMPLETE)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR,
                     scheduled_perf_ns=-2 * MS)
    assert r.outcome == rec.OK
    assert r.ttft_ms == pytest.approx(20.0)
    assert r.itl_ms == pytest.approx([10.0, 15.0])
    assert r.e2e_ms == pytest.approx(46.0)
    assert r.output_tokens == 3 and r.token_source == "usage" and r.input_tokens == 100
    assert r.tpot_ms == pytest.approx((46.0 - 20.0) / 2)
    assert r.schedule_lag_ms == pytest.approx(2.0)
    assert r.ttft_from_schedule_ms == pytest.approx(22.0)
    assert r.sent_ts == pytest.approx(1_700_000_000.0)


def test_events_in_one_read_share_its_timestamp() -> None:
    reads = [(10 * MS, chat_chunk("a") + chat_chunk("b")), (12 * MS, b"data: [DONE]\n\n")]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=12 * MS, end=END_COMPLETE)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.itl_ms == [0.0]
    assert r.output_tokens == 2 and r.token_source == "counted"


def test_missing_terminator_is_never_ok() -> None:
    reads = [(10 * MS, chat_chunk("a")), (20 * MS, chat_chunk("b"))]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=21 * MS, end=END_EOF)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.outcome == rec.INCOMPLETE_STREAM
    assert r.e2e_ms is None and r.tpot_ms is None
    assert r.ttft_ms == pytest.approx(10.0)


def test_stall_outcome() -> None:
    reads = [(10 * MS, chat_chunk("a"))]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=500 * MS, end=END_STALL)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.outcome == rec.STALL


def test_in_stream_error_wins_over_done() -> None:
    err = b'data: {"error": {"message": "boom", "type": "InternalServerError", "code": 500}}\n\n'
    reads = [(10 * MS, chat_chunk("a")), (12 * MS, err + b"data: [DONE]\n\n")]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=12 * MS, end=END_COMPLETE)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.outcome.startswith("stream_error:")
    assert r.error_message and "boom" in r.error_message


def test_malformed_json_is_protocol_error() -> None:
    reads = [(10 * MS, b"data: {not json\n\n"), (12 * MS, b"data: [DONE]\n\n")]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=12 * MS, end=END_COMPLETE)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.outcome == rec.PROTOCOL_ERROR


def test_http_error_with_body() -> None:
    body = b'{"object":"error","message":"queue full","type":"ServiceUnavailable","code":503}'
    ex = RawExchange(sent_ns=0, status=503, reads=[(3 * MS, body)], end_ns=3 * MS,
                     end=END_COMPLETE)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.outcome == "http_503" and r.error_message and "queue full" in r.error_message
    assert r.ttft_ms is None


def test_anthropic_sequence() -> None:
    def ev(name: str, obj: dict) -> bytes:
        return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()

    reads = [
        (2 * MS, ev("message_start", {"type": "message_start", "message": {
            "id": "m", "type": "message", "role": "assistant", "content": [], "model": "x",
            "usage": {"input_tokens": 50, "output_tokens": 1}}})
         + ev("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}})
         + ev("ping", {"type": "ping"})),
        (15 * MS, ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": "hi"}})),
        (25 * MS, ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": " yo"}})
         + ev("content_block_stop", {"type": "content_block_stop", "index": 0})
         + ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                "usage": {"output_tokens": 2}})
         + ev("message_stop", {"type": "message_stop"})),
    ]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=25 * MS, end=END_COMPLETE)
    r = build_record(RequestRecord(request_id="a", workload="w", api="anthropic", model="m"),
                     ex, create_api_adapter("anthropic"), ANCHOR)
    assert r.outcome == rec.OK
    assert r.ttft_ms == pytest.approx(15.0)  # message_start and ping are not content
    assert r.input_tokens == 50 and r.output_tokens == 2


def test_retry_after_header_seconds_and_http_date() -> None:
    from zerohop.client.measure import retry_after_s

    assert retry_after_s("3") == 3.0
    assert retry_after_s(None) is None and retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:05 GMT", now=1445412480.0) == pytest.approx(5.0)
    body = b'{"error": {"message": "slow down", "type": "rate_limit_error"}}'
    ex = RawExchange(sent_ns=0, status=429, headers={"retry-after": "2"},
                     reads=[(1 * MS, body)], end_ns=1 * MS, end=END_COMPLETE)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.outcome == "http_429" and r.retry_after_s == 2.0


def test_server_timing_is_kept_as_sent() -> None:
    """The header is stored whole; tests/analysis/test_time_budget.py reads its entries."""
    header = 'gw;desc="edge";dur=1.25, layer;dur=5.031'
    reads = [(5 * MS, chat_chunk("hi")), (6 * MS, b"data: [DONE]\n\n")]
    ex = RawExchange(sent_ns=0, status=200, headers={"server-timing": header}, reads=reads,
                     end_ns=6 * MS, end=END_COMPLETE)
    r = build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)
    assert r.server_timing == header


# --- reasoning and tool calls -------------------------------------------------------
def delta_chunk(delta: dict[str, object]) -> bytes:
    obj = {"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def replay_chat(reads: list[tuple[int, bytes]]) -> RequestRecord:
    reads = [*reads, (reads[-1][0] + MS, b"data: [DONE]\n\n")]
    ex = RawExchange(sent_ns=0, status=200, reads=reads, end_ns=reads[-1][0], end=END_COMPLETE)
    return build_record(new_record(), ex, create_api_adapter("openai-chat"), ANCHOR)


def test_ttfo_is_the_first_answer_token_after_the_thinking() -> None:
    r = replay_chat([
        (5 * MS, chat_chunk(role=True)),
        (10 * MS, delta_chunk({"reasoning_content": "think"})),
        (20 * MS, delta_chunk({"reasoning_content": " more"})),
        (35 * MS, chat_chunk("answer")),
    ])
    assert r.ttft_ms == pytest.approx(10.0)
    assert r.ttfo_ms == pytest.approx(35.0)
    assert r.reasoning_tokens == 2 and r.output_tokens == 3 and r.tool_calls == 0


def test_without_thinking_ttfo_equals_ttft() -> None:
    r = replay_chat([(5 * MS, chat_chunk(role=True)), (12 * MS, chat_chunk("a"))])
    assert r.ttfo_ms == r.ttft_ms == pytest.approx(12.0)
    assert r.reasoning_tokens == 0


def test_thinking_without_an_answer_has_no_ttfo() -> None:
    r = replay_chat([(10 * MS, delta_chunk({"reasoning": "cut off by max_tokens"}))])
    assert r.ttft_ms == pytest.approx(10.0)
    assert r.ttfo_ms is None
    assert r.reasoning_tokens == 1


def test_reported_reasoning_tokens_win_unless_zero_beside_streamed_thinking() -> None:
    def usage(reasoning: int) -> bytes:
        obj = {"choices": [], "usage": {"completion_tokens": 9,
               "completion_tokens_details": {"reasoning_tokens": reasoning}}}
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    thinking = (10 * MS, delta_chunk({"reasoning_content": "t"}))
    answer = (20 * MS, chat_chunk("a"))
    assert replay_chat([thinking, answer, (21 * MS, usage(7))]).reasoning_tokens == 7
    assert replay_chat([thinking, answer, (21 * MS, usage(0))]).reasoning_tokens == 1
    assert replay_chat([answer, (21 * MS, usage(0))]).reasoning_tokens == 0


def test_tool_calls_are_counted_once_each_and_their_arguments_time_the_answer() -> None:
    def call(index: int, *, name: str | None = None, arguments: str = "") -> bytes:
        function: dict[str, object] = {"arguments": arguments}
        if name is not None:
            function["name"] = name
        return delta_chunk({"tool_calls": [{"index": index, "function": function}]})

    r = replay_chat([
        (5 * MS, delta_chunk({"reasoning_content": "plan"})),
        (10 * MS, call(0, name="f")),  # opens the call: not content yet
        (15 * MS, call(0, arguments="{}")),
        (20 * MS, call(1, name="g", arguments="{")),
        (25 * MS, call(1, name="g", arguments="}")),  # a repeated name is the same call
    ])
    assert r.tool_calls == 2
    assert r.ttft_ms == pytest.approx(5.0)
    assert r.ttfo_ms == pytest.approx(15.0)
    assert r.content_events == 4
