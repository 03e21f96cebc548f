"""The step's end: delivering the prepared tokens to their streams.

While a step runs, each sequence that will sample a token asks its sink for the bytes
(`prepare_writes`); at the step's modelled end the engine writes them back to back
(`write_prepared`). The lag between that end and each write is the sim's own emission
error, so nothing but the writes sits in this path: the lags go into the emission-lag
histogram after the last write (`LagRecorder.add_written`), not between two writes.
"""

from __future__ import annotations

import time

from zerohop.sim.engine.histograms import LagRecorder
from zerohop.sim.sequence import PreparedWrite, Sequence


def prepare_writes(batch: list[tuple[Sequence, int, int]]) -> list[PreparedWrite | None]:
    """Ask each sequence that will sample a token in this step for its bytes now, while
    the step runs, so that its end is nothing but writes."""
    writes: list[PreparedWrite | None] = []
    append = writes.append
    for seq, context, new in batch:
        n = seq.num_output
        if context + new < seq.prompt_tokens + n:
            append(None)  # a prefill chunk: no token this step
        else:
            append(seq.sink.prepare_token(seq, n + 1 >= seq.target_output))
    return writes


def write_prepared(
    writes: list[PreparedWrite | None], end_ns: int, lags: LagRecorder | None = None
) -> list[int]:
    """The step's end: every prepared token to its socket, back to back, and the time
    each write returned (0: not written here); then each written token's lag (its
    write time - `end_ns`) into `lags`. The loop is the emission lag; keep it this
    small."""
    clock = time.perf_counter_ns
    stamps: list[int] = []
    stamp = stamps.append
    for prepared in writes:
        if prepared is None:
            stamp(0)
            continue
        write, data, is_closing = prepared
        if is_closing():  # the client left while the step ran
            stamp(0)
            continue
        write(data)
        stamp(clock())
    if lags is not None:
        lags.add_written(stamps, end_ns)
    return stamps
