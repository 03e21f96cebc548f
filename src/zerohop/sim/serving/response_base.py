"""What every simulated response shares: its context, its sink's bookkeeping (fault
pauses, the PD decode's KV wait, emission lags) and its ground-truth record.

The two answers are `sim/serving/streams.py` (SSE, one chunk per token) and
`sim/serving/buffered_response.py` (one JSON body at the end).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from zerohop.sim.answers.api_shapes import WireShape
from zerohop.sim.answers.greedy_answer import GreedyAnswer
from zerohop.sim.engine.engine import Engine
from zerohop.sim.engine.histograms import LagRecorder
from zerohop.sim.faults import FaultSpec
from zerohop.sim.ground_truth import GroundTruthLog
from zerohop.sim.pd_roles import DecodeLeg, PrefillLeg, prefill_ground_truth
from zerohop.sim.sequence import NULL_SINK, EngineError, PreparedWrite, Sequence
from zerohop.sim.serving.http_server import HttpConnection, HttpRequest

clock_ns = time.perf_counter_ns
CANCELLED_OUTCOME = "cancelled"


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
    greedy: GreedyAnswer | None = None  # a seeded temperature-0 answer (greedy_answer.py)


class ResponseBase:
    """A request's sink for the engine's tokens: its fault's pauses, the PD decode's
    KV wait, its writes' emission lags, and its ground-truth record when it ends.
    `STREAM`: whether it answers as a stream (the record says so)."""

    STREAM = False
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
        now = written_ns or clock_ns()
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
                "stream": self.STREAM,
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
                **_phases_ms(seq),
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



def _loop_time_at(perf_ns: int) -> float:
    """The event loop's clock reading at `perf_counter_ns` time `perf_ns`."""
    return asyncio.get_running_loop().time() + (perf_ns - clock_ns()) / 1e9


def _phases_ms(seq: Sequence) -> dict[str, float | None]:
    """The engine's prefill (first scheduled → token 1) and decode (token 1 → the last
    token), as vLLM's request_prefill/decode_time histograms observe them."""
    scheduled, first = seq.first_scheduled_ns, seq.first_token_ns
    return {
        "prefill_time_ms": None if scheduled is None else _ms(first, scheduled),
        "decode_time_ms": (None if first is None or not seq.done
                           else _ms(seq.last_token_ns, first)),
    }


def _ms(later_ns: int | None, earlier_ns: int) -> float | None:
    return None if later_ns is None else round((later_ns - earlier_ns) / 1e6, 4)
