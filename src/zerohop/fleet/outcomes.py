"""What became of each request on the virtual clock: exact counts of every outcome, and
a `RequestRecord` row for each request in the records sample.

Rows carry virtual timestamps: the run's start (a wall-clock anchor taken when the
simulation began) plus virtual seconds, so the records and the telemetry share one
time axis as a live run's do. An ok row's `server_timing` holds the clock's exact
parts (layer, queue, prefill, decode), which the time budget reads. A failure keeps its
reason in `error_type` and `error_message`, as a live client would record it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from zerohop.core import timing
from zerohop.core.records import (
    CANCELLED,
    CONNECT_ERROR,
    INCOMPLETE_STREAM,
    OK,
    RequestRecord,
    http_outcome,
    stream_error_outcome,
)
from zerohop.fleet.request import FleetRequest
from zerohop.sim.sequence import EngineError

WORKER = "virtual-clock"
Row = dict[str, Any]
_EMPTY_ROW: Row = RequestRecord(request_id="", workload="", api="", model="").to_row()


class Outcomes:
    """Counts every request's outcome; hands the rows of sampled ones to `emit`."""

    def __init__(self, *, start_wall_s: float, workloads: list[str], api: str, model: str,
                 emit: Callable[[Row], None], layer: bool = False) -> None:
        self.start_wall_s = start_wall_s
        self.layer = layer  # rows' Server-Timing names the layer's part
        self.workloads = workloads
        self.api = api
        self.model = model
        self.emit = emit
        self.arrivals = 0
        self.counts: Counter[str] = Counter()
        self.layer_died_ns: int | None = None
        self.last_end_ns = 0

    def arrived(self, req: FleetRequest) -> None:
        self.arrivals += 1

    def finished(self, req: FleetRequest, end_ns: int) -> None:
        self._count(OK, end_ns)
        if req.recorded:
            self.emit(self._ok_row(req, end_ns))

    def failed(self, req: FleetRequest, now_ns: int, error: EngineError) -> None:
        started = req.seq is not None and req.seq.num_output > 0
        if started or (error.status >= 500 and error.status != 503):
            outcome = stream_error_outcome(error.error_type)
            status = 200
        else:
            outcome = http_outcome(error.status)
            status = error.status
        self._fail(req, now_ns, outcome, error.error_type, error.message, status)

    def layer_lost(self, req: FleetRequest, now_ns: int, memory_mib: float) -> None:
        if self.layer_died_ns is None:
            self.layer_died_ns = now_ns
        started = req.seq is not None and req.seq.num_output > 0
        self._fail(req, now_ns, INCOMPLETE_STREAM if started else CONNECT_ERROR,
                   "layer_out_of_memory",
                   f"the layer ran out of memory ({memory_mib:g} MiB) and dropped the request",
                   200 if started else None)

    def layer_down(self, req: FleetRequest, now_ns: int) -> None:
        if self.layer_died_ns is None:
            self.layer_died_ns = now_ns
        self._fail(req, now_ns, CONNECT_ERROR, "layer_down",
                   "connection refused: the layer is down (it ran out of memory)", None)

    def cancelled(self, req: FleetRequest, now_ns: int) -> None:
        self._fail(req, now_ns, CANCELLED, "run_ended", "still running when the run ended", None)

    # --- rows ---------------------------------------------------------------------------
    def _count(self, outcome: str, now_ns: int) -> None:
        self.counts[outcome] += 1
        self.last_end_ns = max(self.last_end_ns, now_ns)

    def _fail(self, req: FleetRequest, now_ns: int, outcome: str, error_type: str,
              message: str, status: int | None) -> None:
        self._count(outcome, now_ns)
        if not req.recorded:
            return
        row = self._base(req)
        row.update(outcome=outcome, end_ts=self._ts(now_ns), http_status=status,
                   error_type=error_type, error_message=message,
                   e2e_from_schedule_ms=timing.ms_between(req.arrival_ns, now_ns))
        if req.token_ns:
            row.update(self._token_fields(req, req.token_ns[0], len(req.token_ns)))
        self.emit(row)

    def _ok_row(self, req: FleetRequest, end_ns: int) -> Row:
        row = self._base(req)
        tokens = req.token_ns
        n = len(tokens)
        e2e_ms = timing.e2e_ms(req.arrival_ns, end_ns)  # a virtual request is sent on arrival
        token_fields = self._token_fields(req, tokens[0], n)
        row.update(
            outcome=OK, end_ts=self._ts(end_ns), http_status=200, e2e_ms=e2e_ms,
            e2e_from_schedule_ms=e2e_ms, output_tokens=n, token_source="usage",
            tpot_ms=timing.tpot_ms(e2e_ms, token_fields["ttft_ms"], n), **token_fields,
            server_timing=self._parts(req, end_ns),
        )
        return row

    def _parts(self, req: FleetRequest, end_ns: int) -> str | None:
        """The clock's exact parts of the request, as a server would send them
        (Server-Timing): the layer, the engine's queue, prefill and decode. The time
        budget reads them per request."""
        seq = req.seq
        if seq is None or seq.first_scheduled_ns is None or seq.first_token_ns is None:
            return None
        parts = [("queue", req.sent_ns, seq.first_scheduled_ns),
                 ("prefill", seq.first_scheduled_ns, seq.first_token_ns),
                 ("decode", seq.first_token_ns, end_ns)]
        if self.layer:
            parts.insert(0, ("layer", req.arrival_ns, req.sent_ns))
        return ", ".join(f"{name};dur={(end - start) / 1e6:.3f}" for name, start, end in parts)

    def _token_fields(self, req: FleetRequest, first_ns: int, n: int) -> Row:
        tokens = req.token_ns
        ttft_ms = timing.ttft_ms(req.arrival_ns, first_ns)
        return {
            "first_content_ts": self._ts(first_ns), "ttft_ms": ttft_ms, "ttfo_ms": ttft_ms,
            "ttft_from_schedule_ms": ttft_ms,
            "server_ttft_ms": timing.ms_between(req.sent_ns, first_ns),
            "itl_ms": timing.itl_ms(tokens),
            "tokens_per_event": [1] * n, "content_events": n, "counted_output_tokens": n,
        }

    def _base(self, req: FleetRequest) -> Row:
        ts = self._ts(req.arrival_ns)
        row = dict(_EMPTY_ROW)
        row.update(
            request_id=f"v{req.index}", workload=self.workloads[req.workload], api=self.api,
            model=self.model, worker=WORKER, scheduled_ts=ts, sent_ts=ts, schedule_lag_ms=0.0,
            input_tokens=req.prompt_tokens, target_input_tokens=req.prompt_tokens,
            max_tokens=req.max_tokens, prompt_token_source="token_ids",
            logical_request_id=f"v{req.index}",
        )
        return row

    def _ts(self, ns: int) -> float:
        return self.start_wall_s + ns / 1e9
