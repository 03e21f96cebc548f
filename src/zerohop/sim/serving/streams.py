"""Per-request responses: the engine's token sinks that write to the socket.

`StreamingResponse` writes one chunked-encoding chunk per token the moment the engine's
step ends, and keeps its tokens' emission lags (write time - the step's modelled end)
for its ground-truth record. Requests without a stream fault prepare each token's bytes
when its step is planned (`prepare_token`) and the engine writes them (and puts their
lags into the emission-lag histogram); the faulty ones write in `on_token`
(`_on_token_with_fault`), which is allowed to be slow, and note their lags themselves.
What every response shares (its record, its lags) is `sim/serving/response_base.py`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from zerohop.core.records import INCOMPLETE_STREAM, OK, PROTOCOL_ERROR, stream_error_outcome
from zerohop.sim.answers.tokens import WORD_PIECE_BYTES
from zerohop.sim.faults import FaultSpec
from zerohop.sim.sequence import EngineError, PreparedWrite, Sequence
from zerohop.sim.serving.http_server import LAST_CHUNK, chunk
from zerohop.sim.serving.response_base import ResponseBase, ResponseContext

_N_PIECES = len(WORD_PIECE_BYTES)
_LONGEST_PIECE = max(len(piece) for piece in WORD_PIECE_BYTES)
MALFORMED_SSE_LINE = b"zerohop-malformed-line-without-field-separator\n\n"

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


class StreamingResponse(ResponseBase):
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

    STREAM = True
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
