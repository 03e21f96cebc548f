"""The step's end: delivering the prepared tokens to their streams.

While a step runs, each sequence that will sample a token asks its sink for the bytes
(`prepare_writes`); at the step's modelled end the engine writes them back to back
(`write_prepared`). The lag between that end and each write is the sim's own emission
error, so nothing but the writes sits in this path.
"""

from __future__ import annotations

import time

from zerohop.sim.sequence import PreparedWrite, Sequence


def prepare_writes(batch: list[tuple[Sequence, int, int]]) -> list[PreparedWrite | None]:
    """Ask each sequence that will sample a token in this step for its bytes now, while
    the step runs, so that its end is nothing but writes."""
    writes: list[PreparedWrite | None] = []
    for seq, context, new in batch:
        if context + new < seq.prompt_tokens + seq.num_output:
            writes.append(None)  # a prefill chunk: no token this step
        else:
            finished = seq.num_output + 1 >= seq.target_output
            writes.append(seq.sink.prepare_token(seq, finished))
    return writes


def write_prepared(writes: list[PreparedWrite | None]) -> list[int]:
    """The step's end: every prepared token to its socket, back to back, and the time
    each write returned (0: not written here). This loop is the emission lag; keep it
    this small."""
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
    return stamps
