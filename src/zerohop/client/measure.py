"""Turn a raw exchange (timestamped body reads) into a RequestRecord.

This runs after the stream has ended, off the timing path: it splits SSE events, decodes
JSON through the protocol adapter, and derives TTFT, ITL, TPOT, E2E, token counts and the
outcome. Pure: no sockets, no clocks, so every rule here is tested on synthetic input.

Reasoning models: TTFT is the first generated content, thinking included (what the user
waits for before anything streams); TTFO ("time to first output token", AIPerf's name)
is the first answer content after the thinking. Without thinking the two are the same
read, so `ttfo_ms` equals `ttft_ms` and a TTFO objective covers every request, reasoning
or not; it is None only when no answer content came at all.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from zerohop.client.http_stream import (
    END_CONNECT_ERROR,
    END_PROTOCOL,
    END_STALL,
    END_TIMEOUT_TOTAL,
    END_TIMEOUT_TTFT,
    RawExchange,
)
from zerohop.client.protocols import (
    ApiAdapter,
    ContentDelta,
    ProtocolError,
    StreamedToolCall,
    StreamError,
    Terminator,
    ToolCall,
    ToolCallPart,
    Usage,
)
from zerohop.client.sse import SSEParser
from zerohop.core import records as rec
from zerohop.core import timing
from zerohop.core.records import ClockAnchor, RequestRecord


@dataclass
class _CallParts:
    """What a tool call's parts said: the first id and name, every argument fragment."""

    call_id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)


@dataclass
class _Decoded:
    content_ns: list[int]
    content_tokens: list[int | None]
    usage: Usage | None
    terminated: bool
    error: StreamError | None
    protocol_error: str | None
    content_reasoning: list[bool] = field(default_factory=list)  # per content event
    tool_calls: set[str] = field(default_factory=set)  # ToolCall keys seen
    call_parts: dict[str, _CallParts] = field(default_factory=dict)  # by key, in order


class StreamDecode:
    """A stream's decoding, fed one read at a time, so every byte is parsed once.

    The hot path feeds it only until the first content event (`feed_early`: the TTFT
    limit needs to know when content began); `build_record` feeds it the remaining reads
    after the stream has ended. `answer` receives the answer's text (thinking and
    tool-call arguments left out); with `collect_calls` the tool calls' parts are kept."""

    def __init__(self, adapter: ApiAdapter, *, answer: list[str] | None = None,
                 collect_calls: bool = False) -> None:
        self._parser = SSEParser()
        self._decoder = (adapter.new_stream_decoder(tool_call_parts=True) if collect_calls
                         else adapter.new_stream_decoder())
        self._answer = answer
        self.out = _Decoded([], [], None, False, None, None)
        self.reads_fed = 0

    def feed(self, ts: int, payload: bytes) -> None:
        """Decode one read's bytes (arrived at perf_counter_ns `ts`); after a protocol
        error the rest of the stream is ignored."""
        self.reads_fed += 1
        out = self.out
        if out.protocol_error is not None:
            return
        try:
            for event in self._parser.feed(payload):
                for item in self._decoder.decode_event(event):
                    if isinstance(item, ContentDelta):
                        out.content_ns.append(ts)
                        out.content_tokens.append(item.tokens)
                        out.content_reasoning.append(item.reasoning)
                        if self._answer is not None and not (item.reasoning
                                                             or item.tool_arguments):
                            self._answer.append(item.text)
                    elif isinstance(item, ToolCall):
                        out.tool_calls.add(item.key)
                    elif isinstance(item, ToolCallPart):
                        _add_part(out.call_parts, item)
                    elif isinstance(item, Usage):
                        out.usage = item
                    elif isinstance(item, StreamError):
                        out.error = out.error or item
                    elif isinstance(item, Terminator):
                        out.terminated = True
        except (ProtocolError, ValueError) as exc:  # SSEOverflow is a ValueError
            out.protocol_error = f"{type(exc).__name__}: {exc}"

    def feed_early(self, ts: int, payload: bytes) -> bool:
        """The hot path's detector: feed one read; does the stream hold content (or an
        error or its end, which also lift the TTFT limit) yet?"""
        self.feed(ts, payload)
        out = self.out
        return bool(out.content_ns or out.error or out.terminated
                    or out.protocol_error is not None)


def build_record(
    record: RequestRecord,
    exchange: RawExchange,
    adapter: ApiAdapter,
    anchor: ClockAnchor,
    *,
    scheduled_perf_ns: int | None = None,
    queue_wait_ns: int | None = None,
    pause: Callable[[], None] | None = None,
    answer: list[str] | None = None,
    tool_calls: list[StreamedToolCall] | None = None,
    scan: StreamDecode | None = None,
) -> RequestRecord:
    """Fill `record` (identity fields already set) from what the wire delivered.

    `pause`, when given, is called between reads while decoding, so a cooperative caller
    (a gevent client timing other streams) can hand the CPU back: decoding must never
    delay the timestamps of reads that are arriving meanwhile. `answer` receives the
    answer's text (thinking and tool-call arguments left out), `tool_calls` each tool
    call the response made (its id, name and argument text as streamed), for a client
    that sends them back as history; neither changes the record. `scan` is the
    exchange's own decoding, already fed the reads up to the first content (the hot
    path's detector); without one the whole stream is decoded here. `queue_wait_ns`:
    how long the arrival waited for a --max-concurrency slot after `scheduled_perf_ns`
    (the schedule lag counts from the slot; the latencies from schedule include it)."""
    ex = exchange
    if fill_exchange(record, ex, anchor, adapter.decode_error_body,
                     scheduled_perf_ns=scheduled_perf_ns, queue_wait_ns=queue_wait_ns):
        return record
    if scan is None:
        scan = StreamDecode(adapter, answer=answer, collect_calls=tool_calls is not None)
    decoded = _decode(ex, scan, pause)
    if tool_calls is not None:
        tool_calls.extend(_streamed_calls(decoded))
    _fill_timings(record, ex, decoded, anchor, scheduled_perf_ns)
    _fill_tokens(record, decoded)
    record.outcome = _outcome(ex, decoded, record)
    return record


def fill_exchange(record: RequestRecord, ex: RawExchange, anchor: ClockAnchor,
                  decode_error: Callable[[int, bytes], StreamError], *,
                  scheduled_perf_ns: int | None, queue_wait_ns: int | None) -> bool:
    """What every exchange's record says, streamed or not: its stamps, status, headers
    and schedule lag; and, for an exchange that failed before a 200 body (a connect
    error, a non-200 status with its error body read by `decode_error`), its outcome.
    True when the record is then complete."""
    record.sent_ts = anchor.wall_s(ex.sent_ns)
    record.end_ts = anchor.wall_s(ex.end_ns)
    record.http_status = ex.status
    record.server_timing = rec.truncate_message(ex.headers.get("server-timing"))
    record.replica = rec.truncate_message(ex.headers.get(rec.REPLICA_HEADER))
    if scheduled_perf_ns is not None:
        record.scheduled_ts = anchor.wall_s(scheduled_perf_ns)
        record.schedule_lag_ms = timing.schedule_lag_ms(scheduled_perf_ns, ex.sent_ns,
                                                        queue_wait_ns)
    if ex.end == END_CONNECT_ERROR:
        record.outcome, record.error_message = rec.CONNECT_ERROR, rec.truncate_message(ex.error)
        return True
    if ex.status is not None and ex.status != 200:
        body = b"".join(chunk for _, chunk in ex.reads)
        err = decode_error(ex.status, body)
        record.outcome = rec.http_outcome(ex.status)
        record.retry_after_s = retry_after_s(ex.headers.get("retry-after"))
        record.error_type, record.error_message = err.error_type, rec.truncate_message(err.message)
        record.e2e_ms = timing.e2e_ms(ex.sent_ns, ex.end_ns)
        return True
    return False


def retry_after_s(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds, or an HTTP-date (RFC 9110); None if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _decode(ex: RawExchange, scan: StreamDecode, pause: Callable[[], None] | None
            ) -> _Decoded:
    """Feed `scan` the reads the hot path did not (those after the first content)."""
    for ts, payload in ex.reads[scan.reads_fed:]:
        if pause is not None:
            pause()
        scan.feed(ts, payload)
        if scan.out.protocol_error is not None:
            break
    return scan.out


def _add_part(calls: dict[str, _CallParts], part: ToolCallPart) -> None:
    call = calls.setdefault(part.key, _CallParts())
    call.call_id = call.call_id if call.call_id is not None else part.call_id
    call.name = call.name if call.name is not None else part.name
    if part.arguments:
        call.fragments.append(part.arguments)


def _streamed_calls(d: _Decoded) -> list[StreamedToolCall]:
    """The calls the response opened (its `ToolCall`s), each as its parts put together."""
    return [StreamedToolCall(call.call_id, call.name, "".join(call.fragments))
            for key, call in d.call_parts.items() if key in d.tool_calls]


def _fill_timings(
    record: RequestRecord,
    ex: RawExchange,
    d: _Decoded,
    anchor: ClockAnchor,
    scheduled_ns: int | None,
) -> None:
    if d.content_ns:
        first = d.content_ns[0]
        record.first_content_ts = anchor.wall_s(first)
        record.ttft_ms = timing.ttft_ms(ex.sent_ns, first)
        record.itl_ms = timing.itl_ms(d.content_ns)
        if scheduled_ns is not None:
            record.ttft_from_schedule_ms = timing.ms_between(scheduled_ns, first)
        answer = next((ts for ts, r in zip(d.content_ns, d.content_reasoning, strict=True)
                       if not r), None)
        if answer is not None:
            record.ttfo_ms = timing.ttft_ms(ex.sent_ns, answer)  # TTFT of the answer
    record.content_events = len(d.content_ns)
    if all(t is not None for t in d.content_tokens) and d.content_tokens:
        record.tokens_per_event = [int(t) for t in d.content_tokens if t is not None]
    if d.terminated:
        record.e2e_ms = timing.e2e_ms(ex.sent_ns, ex.end_ns)
        if scheduled_ns is not None:
            record.e2e_from_schedule_ms = timing.ms_between(scheduled_ns, ex.end_ns)


def _fill_tokens(record: RequestRecord, d: _Decoded) -> None:
    usage = d.usage
    counted = sum(t if t is not None else 1 for t in d.content_tokens)
    record.counted_output_tokens = counted
    # a usage of 0 beside delivered content is a server that does not count: ignore it
    if usage is not None and usage.output_tokens is not None and (
        usage.output_tokens > 0 or counted == 0
    ):
        record.output_tokens, record.token_source = usage.output_tokens, "usage"
    else:
        record.output_tokens, record.token_source = counted, "counted"
    if usage is not None and usage.input_tokens:  # no prompt is 0 tokens: 0 = not counted
        record.input_tokens = usage.input_tokens
    if usage is not None:  # 0 is a real answer here: nothing came from the prefix cache
        record.cached_tokens = usage.cached_tokens
    thought = sum(
        t if t is not None else 1
        for t, r in zip(d.content_tokens, d.content_reasoning, strict=True)
        if r
    )
    reported = usage.reasoning_tokens if usage is not None else None
    # like output_tokens: a reported 0 beside streamed thinking is a server that does not count
    if reported is not None and (reported > 0 or thought == 0):
        record.reasoning_tokens = reported
    else:
        record.reasoning_tokens = thought
    record.tool_calls = len(d.tool_calls)
    record.tpot_ms = timing.tpot_ms(record.e2e_ms, record.ttft_ms, record.output_tokens)


def _outcome(ex: RawExchange, d: _Decoded, record: RequestRecord) -> str:
    """The first thing that went wrong names the outcome; a stream is `ok` only when it
    ended with its terminator and nothing went wrong before."""
    if d.protocol_error is not None:
        record.error_message = rec.truncate_message(d.protocol_error)
        return rec.PROTOCOL_ERROR
    if d.error is not None:
        record.error_type = d.error.error_type
        record.error_message = rec.truncate_message(d.error.message)
        return rec.stream_error_outcome(d.error.error_type)
    if d.terminated:
        return rec.OK
    if ex.end == END_TIMEOUT_TTFT:
        return rec.TIMEOUT_TTFT
    if ex.end == END_STALL:
        return rec.STALL
    if ex.end == END_TIMEOUT_TOTAL:
        return rec.TIMEOUT_TOTAL
    if ex.end == END_PROTOCOL:
        record.error_message = rec.truncate_message(ex.error)
        return rec.PROTOCOL_ERROR
    # END_EOF, END_RESET or END_COMPLETE without a terminator event
    record.error_message = rec.truncate_message(
        ex.error or f"stream ended ({ex.end}) without its terminator"
    )
    return rec.INCOMPLETE_STREAM
