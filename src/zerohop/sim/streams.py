"""Per-request responses: the engine's token sinks that write to the socket.

`StreamingResponse` writes one chunked-encoding chunk per token the moment the engine's
step ends, and keeps its tokens' emission lags (write time - the step's modelled end)
for its ground-truth record. Requests without a stream fault prepare each token's bytes
when its step is planned (`prepare_token`) and the engine writes them (and puts their
lags into the emission-lag histogram); the faulty ones write in `on_token`
(`_on_token_with_fault`), which is allowed to be slow, and note their lags themselves.
`BufferedResponse` answers non-streaming requests with one JSON body at the end.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zerohop.core.records import INCOMPLETE_STREAM, OK, PROTOCOL_ERROR, stream_error_outcome
from zerohop.sim.api_shapes import WireShape, error_body
from zerohop.sim.engine import Engine
from zerohop.sim.faults import FaultSpec
from zerohop.sim.ground_truth import GroundTruthLog
from zerohop.sim.histograms import LagRecorder
from zerohop.sim.http_server import LAST_CHUNK, HttpConnection, HttpRequest, chunk
from zerohop.sim.pd_roles import DecodeLeg, PrefillLeg, prefill_ground_truth
from zerohop.sim.sequence import NULL_SINK, EngineError, PreparedWrite, Sequence
from zerohop.sim.tokens import WORD_PIECE_BYTES, generated_text

_N_PIECES = len(WORD_PIECE_BYTES)
_LONGEST_PIECE = max(len(piece) for piece in WORD_PIECE_BYTES)
_clock = time.perf_counter_ns
MALFORMED_SSE_LINE = b"zerohop-malformed-line-without-field-separator\n\n"
CANCELLED_OUTCOME = "cancelled"

_Lane = tuple[Callable[[bytes], object], Callable[[], bool], tuple[bytes, ...], bytes, bytes]
"""A healthy stream's write path: (write, is_closing, chunk-size lines by word length,
the frame's head, the frame's tail with the chunk's closing CRLF)."""


@functools.lru_cache(maxsize=64)
def _size_lines(frame_bytes: int) -> tuple[bytes, ...]:
    """The chunk-size line of a token chunk whose frame is `frame_bytes` long, by the
    length of its word."""
    return tuple(b"%x\r\n" % (frame_bytes + n) for n in range(_LONGEST_PIECE + 1))


@functools.lru_cache(maxsize=64)
def _closing(tail: bytes) -> bytes:
    """A frame's tail and the chunk's closing CRLF: one object for every stream of a
    shape (its tail names no request), so that the step's joins read one hot copy."""
    return tail + b"\r\n"


@dataclass
class ResponseContext:
    """What every response needs besides the sequence itself."""

    conn: HttpConnection
    request: HttpRequest
    engine: Engine
    shape: WireShape
    request_id: str
    model_name: str
    adapter: str | None
    word_offset: int
    fault: FaultSpec | None
    ground_truth: GroundTruthLog
    emission_lag: LagRecorder
    keep_token_lags: bool
    extra_headers: list[tuple[bytes, bytes]]
    prefill_leg: PrefillLeg | None = None  # PD prefill: answer with kv_transfer_params
    decode_leg: DecodeLeg | None = None  # PD decode: the KV arrives, then decode


class _ResponseBase:
    __slots__ = ("conn", "ctx", "engine", "fault_name", "finished_record", "first_write_ns",
                 "lag_count", "lag_max_ns", "lag_sum_ns", "last_write_ns", "offset", "seq",
                 "shape", "token_lags_us", "token_writes_ns")

    def __init__(self, ctx: ResponseContext, seq_args: dict[str, Any]) -> None:
        self.ctx = ctx
        self.conn = ctx.conn
        self.shape = ctx.shape
        self.engine = ctx.engine
        self.offset = ctx.word_offset
        self.seq = Sequence(sink=self, **seq_args)
        self.first_write_ns: int | None = None
        self.last_write_ns = 0
        self.lag_count = 0
        self.lag_sum_ns = 0
        self.lag_max_ns = 0
        self.token_lags_us: list[int] | None = [] if ctx.keep_token_lags else None
        self.token_writes_ns: list[int] | None = [] if ctx.keep_token_lags else None
        self.finished_record = False
        fault = ctx.fault
        self.fault_name = fault.name if fault is not None else None
        if fault is not None:
            if fault.name in ("stall_before_first", "slow_headers"):
                self.seq.paused_until_ns = self.seq.arrival_ns + int(fault.number("s") * 1e9)
            elif fault.name == "stall_mid":
                self.seq.pause_after_tokens = fault.integer("after")
                self.seq.pause_ns = int(fault.number("s") * 1e9)

    def start(self) -> None:
        self.conn.on_lost = self._client_gone
        leg = self.ctx.decode_leg
        if leg is None:
            self.engine.submit(self.seq)
            return
        # PD decode: the prompt's KV (all but its last token, which the first step
        # computes) is pulled first; the sequence joins the queue when it is here
        self.seq.remote_kv_tokens = max(0, self.seq.prompt_tokens - 1)
        asyncio.get_running_loop().call_at(
            _loop_time_at(self.seq.arrival_ns + leg.transfer_ns), self._kv_arrived)

    def _kv_arrived(self) -> None:
        if not self.seq.done:
            self.engine.submit(self.seq)

    def _server_timing(self) -> list[tuple[bytes, bytes]]:
        """The reply's headers, with the PD decode's Server-Timing once it is known."""
        leg = self.ctx.decode_leg
        return self.ctx.extra_headers if leg is None else leg.headers(self.ctx.extra_headers,
                                                                      self.seq)

    def prepare_token(self, seq: Sequence, finished: bool) -> PreparedWrite | None:
        return None

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        raise NotImplementedError

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        raise NotImplementedError

    def _client_gone(self) -> None:
        if not self.seq.done:
            self.engine.abort(self.seq)
        self._record(CANCELLED_OUTCOME, status=200)

    def _note_write(self, scheduled_ns: int, written_ns: int = 0) -> None:
        """A token the response wrote itself went out at `written_ns` (0: just now)."""
        now = written_ns or _clock()
        if self.first_write_ns is None:
            self.first_write_ns = now
        self.last_write_ns = now
        lag = now - scheduled_ns
        self.ctx.emission_lag.add_ns(lag)
        self.lag_count += 1
        self.lag_sum_ns += lag
        if lag > self.lag_max_ns:
            self.lag_max_ns = lag
        if self.token_lags_us is not None:
            self._keep_token_lag(now, lag)

    def _keep_token_lag(self, written_ns: int, lag: int) -> None:
        """With `ground_truth_token_lags`: each token's write time and lag."""
        assert self.token_lags_us is not None and self.token_writes_ns is not None
        self.token_writes_ns.append(written_ns)
        self.token_lags_us.append(max(0, lag) // 1000)

    def _record(
        self,
        outcome: str,
        *,
        status: int,
        error_type: str | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        if self.finished_record:
            return
        self.finished_record = True
        seq = self.seq
        if seq.done:  # the engine is through with it: no cycle left for the collector
            seq.sink = NULL_SINK
        gt = self.ctx.ground_truth
        arrival = seq.arrival_ns
        lags: Any
        if self.token_lags_us is not None:
            lags = [round(v / 1000, 3) for v in self.token_lags_us]
        elif self.lag_count:
            lags = {
                "n": self.lag_count,
                "mean": round(self.lag_sum_ns / self.lag_count / 1e6, 4),
                "max": round(self.lag_max_ns / 1e6, 4),
            }
        else:
            lags = None
        completion = seq.num_output if completion_tokens is None else completion_tokens
        answer = self.shape.answer
        record = {
                "request_id": self.ctx.request_id,
                "api": self.shape.api,
                "model": self.ctx.model_name,
                "adapter": self.ctx.adapter,
                "stream": isinstance(self, StreamingResponse),
                "accepted_ts": gt.wall_s(self.ctx.request.accepted_ns),
                "arrival_ts": gt.wall_s(arrival),
                "first_token_ts": gt.wall_s(self.first_write_ns),
                "last_token_ts": gt.wall_s(self.last_write_ns or None),
                "scheduled_first_token_ts": gt.wall_s(seq.first_token_ns),
                "prompt_tokens": seq.prompt_tokens,
                "completion_tokens": completion,
                "reasoning_tokens": answer.reasoning_in(completion),
                "tool_calls": answer.tool_calls_in(completion),
                "max_tokens": seq.max_tokens,
                "outcome": outcome,
                "http_status": status,
                "error_type": error_type,
                "finish_reason": seq.finish_reason,
                "fault": self.ctx.fault.header_value() if self.ctx.fault else None,
                "server_ttft_ms": _ms(self.first_write_ns, arrival),
                "server_e2e_ms": _ms(self.last_write_ns or None, arrival),
                "queue_ms": _ms(seq.first_scheduled_ns, arrival),
                "preemptions": seq.preemptions,
                "max_emission_lag_ms": round(self.lag_max_ns / 1e6, 4) if self.lag_count else None,
                "emit_lag_ms": lags,
                "token_ts": (None if self.token_writes_ns is None
                             else [gt.wall_s(ns) for ns in self.token_writes_ns]),
        }
        if self.ctx.decode_leg is not None:
            record.update(self.ctx.decode_leg.ground_truth(seq))
        elif self.ctx.prefill_leg is not None:
            record.update(prefill_ground_truth(seq))
        gt.add(record)


class StreamingResponse(_ResponseBase):
    """SSE over chunked encoding, one chunk per token.

    A healthy stream's token chunk is built when its step is planned
    (`prepare_token`), so that the token costs one socket write at the step's end.
    Where the API's shape frames every middle token the same way (`token_frame`: the
    plain answers), the stream keeps that frame, split around the token's text, from
    its start (`_Lane`), and a middle token's chunk is one `bytes.join` of four parts:
    the chunk-size line (from a table shared by the streams whose frames are as long),
    the frame's head, the word, the frame's tail. Built then, not cached per stream: a
    cache of every chunk of 500 streams is megabytes, and reading it back cold makes
    each write slower (tests/bench/bench_loopback_burst.py). The first and last
    tokens, and every token of a shape without one frame, are built by the shape's own
    builders (`_prepare_general`). Faulty streams, and any token the engine did not
    write, take `_on_token_slow`, which builds and writes it on the spot.
    """

    __slots__ = ("_lane", "_pending", "_socket")

    def __init__(self, ctx: ResponseContext, seq_args: dict[str, Any]) -> None:
        super().__init__(ctx, seq_args)
        self._socket: tuple[Callable[[bytes], object], Callable[[], bool]] | None = None
        self._lane: _Lane | None = None
        self._pending: list[bytes] | None = None

    def start(self) -> None:
        if self.ctx.decode_leg is not None:
            # PD decode: the head carries Server-Timing with this side's queue and first
            # step, known when token 1 is: it goes with token 1 (`_open_with_timing`)
            self._pending = []
        else:
            head = self.conn.start_chunked(200, self.shape.content_type,
                                           self.ctx.extra_headers)
            events = self.shape.head_events()
            opening = head + (chunk(events) if events else b"")
            if self.fault_name == "slow_headers":
                delay = self.ctx.fault.number("s") if self.ctx.fault else 0.0
                self._pending = []
                asyncio.get_running_loop().call_later(delay, self._release_head, opening)
            else:
                self.conn.write(opening)
                self._open_lanes()
        super().start()
        fault = self.ctx.fault
        if fault is not None and fault.name == "drop_mid" and fault.integer("after") == 0:
            self._break_connection()
        elif fault is not None and fault.name == "stream_error" and fault.integer("after") == 0:
            self._stream_error_now(fault)

    def _open_lanes(self) -> None:
        """The head is out: a healthy stream's tokens may take the hot path."""
        transport = self.conn.transport
        if self.fault_name is None and transport is not None:
            self._socket = (transport.write, transport.is_closing)
            frame = self.shape.token_frame()
            if frame is not None:
                head, tail = frame
                self._lane = (transport.write, transport.is_closing,
                              _size_lines(len(head) + len(tail)), head, _closing(tail))

    def _open_if_held(self) -> None:
        """A PD decode's head still held (token 1, an error or a fault comes): send it."""
        if self._pending is not None and self.ctx.decode_leg is not None:
            self._open_with_timing()

    def _open_with_timing(self) -> None:
        """PD decode, token 1 sampled: the head with its Server-Timing, then the lanes."""
        head = self.conn.start_chunked(200, self.shape.content_type, self._server_timing())
        events = self.shape.head_events()
        self._release_head(head + (chunk(events) if events else b""))
        self._open_lanes()

    def _piece(self, index: int) -> bytes:
        return WORD_PIECE_BYTES[(self.offset + index) % _N_PIECES]

    def _token_chunk(self, index: int) -> bytes:
        """Token `index` of a healthy stream, framed; the first carries the opening events."""
        data = self.shape.token_event(index, self._piece(index))
        if index == 0:
            data = self.shape.first_events() + data
        return chunk(data)

    def _final_chunk(self, tokens: int, reason: str) -> bytes:
        """The last token of a healthy `tokens`-token answer, its tail events (usage,
        terminator) and the end of the chunked body."""
        shape = self.shape
        data = shape.last_token_event(tokens - 1, self._piece(tokens - 1), reason)
        if tokens == 1:
            data = shape.first_events() + data
        data += shape.tail_events(self.seq.prompt_tokens, tokens, reason, True,
                                  self.seq.num_cached)
        return chunk(data) + LAST_CHUNK

    def _stream_error_now(self, fault: FaultSpec) -> None:
        """stream_error;after=0: the error event before any token."""
        self._open_if_held()
        kind = fault.text("type")
        self._write(chunk(self.shape.error_event(kind, fault.text("message"))) + LAST_CHUNK)
        if not self.seq.done:
            self.engine.abort(self.seq)
        self._record(stream_error_outcome(kind), status=200, error_type=kind)
        self.conn.finish()

    def _release_head(self, opening: bytes) -> None:
        pending, self._pending = self._pending or [], None
        self.conn.write(opening + b"".join(pending))

    def _write(self, data: bytes) -> None:
        if self._pending is not None:
            self._pending.append(data)
        else:
            self.conn.write(data)

    # --- the hot path -------------------------------------------------------------
    def prepare_token(self, seq: Sequence, finished: bool) -> PreparedWrite | None:
        """The next token's chunk, for the engine to write at the step's end."""
        n = seq.num_output
        lane = self._lane
        if lane is None or finished or not n:
            return self._prepare_general(seq, finished)
        write, is_closing, sizes, head, tail = lane
        piece = WORD_PIECE_BYTES[(self.offset + n) % _N_PIECES]
        return write, b"".join((sizes[len(piece)], head, piece, tail)), is_closing

    def _prepare_general(self, seq: Sequence, finished: bool) -> PreparedWrite | None:
        socket = self._socket
        if socket is None or not self.conn.writable:
            return None
        n = seq.num_output + 1
        if finished:
            data = self._final_chunk(n, seq.planned_finish_reason)
        else:
            data = self._token_chunk(n - 1)
        return socket[0], data, socket[1]

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        if not written_ns:
            self._on_token_slow(seq, scheduled_ns, finished)
            return
        # _note_write, inlined; the engine put the lag in the emission-lag histogram
        if self.first_write_ns is None:
            self.first_write_ns = written_ns
        self.last_write_ns = written_ns
        lag = written_ns - scheduled_ns
        self.lag_count += 1
        self.lag_sum_ns += lag
        if lag > self.lag_max_ns:
            self.lag_max_ns = lag
        if self.token_lags_us is not None:
            self._keep_token_lag(written_ns, lag)
        if finished:
            self.conn.on_lost = None
            self.conn.turns.submit(self._finish_ok)

    def _on_token_slow(self, seq: Sequence, scheduled_ns: int, finished: bool) -> None:
        self._open_if_held()
        if self.fault_name is not None:
            self._on_token_with_fault(seq, scheduled_ns, finished)
            return
        if not self.conn.writable:
            return
        if not finished:
            self._write(self._token_chunk(seq.num_output - 1))
            self._note_write(scheduled_ns)
            return
        self._write(self._final_chunk(seq.num_output, seq.finish_reason or "length"))
        self._note_write(scheduled_ns)
        self.conn.on_lost = None
        self.conn.turns.submit(self._finish_ok)

    def _finish_ok(self) -> None:
        self._record(OK, status=200)
        self.conn.finish()

    # --- faults and errors ---------------------------------------------------------
    def _on_token_with_fault(self, seq: Sequence, scheduled_ns: int, finished: bool) -> None:
        fault = self.ctx.fault
        assert fault is not None
        index = seq.num_output - 1
        piece = self._piece(index)
        shape = self.shape
        name = fault.name
        # after=0 means "with the first token" (stream_error: before it, see start())
        trigger_at = max(1, fault.integer("after")) if "after" in fault.params else -1
        at_trigger = seq.num_output == trigger_at or (finished and trigger_at > seq.num_output)
        if name == "oversized_chunk" and at_trigger:
            piece = b" " + b"x" * max(1, fault.integer("bytes") - 1)
        reason = seq.finish_reason or "length"
        if finished:
            data = shape.last_token_event(index, piece, reason)
        else:
            data = shape.token_event(index, piece)
        if index == 0:
            data = shape.first_events() + data
        if at_trigger and name == "malformed_sse":
            data += MALFORMED_SSE_LINE
        elif at_trigger and name == "invalid_json":
            data += shape.invalid_json_event()
        if at_trigger and name == "stream_error":
            data += shape.error_event(fault.text("type"), fault.text("message"))
            self._write(chunk(data) + LAST_CHUNK)
            self._note_write(scheduled_ns)
            if not seq.done:
                self.engine.abort(seq)
            self._record(
                stream_error_outcome(fault.text("type")), status=200, error_type=fault.text("type")
            )
            self.conn.finish()
            return
        if at_trigger and name in ("drop_mid", "reset"):
            self._write(chunk(data))
            self._note_write(scheduled_ns)
            self._break_connection()
            return
        if not finished:
            self._write(chunk(data))
            self._note_write(scheduled_ns)
            return
        terminator = name != "missing_terminator"
        data += shape.tail_events(seq.prompt_tokens, seq.num_output, reason, terminator,
                                  seq.num_cached)
        self._write(chunk(data) + LAST_CHUNK)
        self._note_write(scheduled_ns)
        if not terminator:
            self._record(INCOMPLETE_STREAM, status=200)
            self.conn.finish(close=True)
            return
        # a line without a field separator is a valid SSE field with an empty value,
        # which the SSE spec (and every SDK) ignores: the stream is still ok. Broken
        # JSON inside a `data:` event is the client-visible protocol error.
        self._record(PROTOCOL_ERROR if name == "invalid_json" else OK, status=200)
        self.conn.finish()

    def _break_connection(self) -> None:
        """drop_mid / reset: end the connection mid-body, no terminator."""
        self._open_if_held()
        if not self.seq.done:
            self.engine.abort(self.seq)
        self._record(INCOMPLETE_STREAM, status=200)
        self.conn.on_lost = None
        if self.fault_name == "reset":
            self.conn.reset()
        else:
            self.conn.close()

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        self._open_if_held()
        self._write(chunk(self.shape.error_event(error.error_type, error.message)) + LAST_CHUNK)
        self._record(
            stream_error_outcome(error.error_type), status=200, error_type=error.error_type
        )
        self.conn.finish()


class BufferedResponse(_ResponseBase):
    """A non-streaming request: one JSON body when the answer is complete."""

    __slots__ = ()

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        if seq.num_output == 1:
            self.first_write_ns = None  # set at the real write below
        if not finished:
            return
        reason = seq.finish_reason or "length"
        text = generated_text(self.offset, seq.num_output)
        name = self.fault_name
        if name == "oversized_chunk" and self.ctx.fault is not None:
            text += " " + "x" * self.ctx.fault.integer("bytes")
        body = self.shape.final_body(text, seq.prompt_tokens, seq.num_output, reason,
                                     seq.num_cached)
        if name == "stream_error" and self.ctx.fault is not None:
            kind = self.ctx.fault.text("type")
            body = error_body(self.shape.api, 500, self.ctx.fault.text("message"), kind)
            self.conn.send(500, body, extra_headers=self.ctx.extra_headers)
            self._note_write(scheduled_ns)
            self._record(f"http_{500}", status=500, error_type=kind)
            return
        if name in ("drop_mid", "reset", "missing_terminator"):
            head = self.conn.start_chunked(200, b"application/json", self.ctx.extra_headers)
            self.conn.write(head + chunk(body[: len(body) // 2]))
            self._note_write(scheduled_ns)
            self._record(INCOMPLETE_STREAM, status=200)
            self.conn.on_lost = None
            if name == "reset":
                self.conn.reset()
            else:
                self.conn.close()
            return
        if self.ctx.prefill_leg is not None:
            body = self.ctx.prefill_leg.answer(body, seq, self.engine.pool.block_size)
        if name in ("invalid_json", "malformed_sse"):
            body = body[: len(body) // 2]
        self.conn.send(200, body, extra_headers=self._server_timing())
        self._note_write(scheduled_ns)
        broken = name in ("invalid_json", "malformed_sse")
        self._record(PROTOCOL_ERROR if broken else OK, status=200)

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        body = error_body(self.shape.api, error.status, error.message, error.error_type)
        self.conn.send(error.status, body, extra_headers=self.ctx.extra_headers)
        self._record(f"http_{error.status}", status=error.status, error_type=error.error_type)


def _loop_time_at(perf_ns: int) -> float:
    """The event loop's clock reading at `perf_counter_ns` time `perf_ns`."""
    return asyncio.get_running_loop().time() + (perf_ns - _clock()) / 1e9


def _ms(later_ns: int | None, earlier_ns: int) -> float | None:
    return None if later_ns is None else round((later_ns - earlier_ns) / 1e6, 4)
