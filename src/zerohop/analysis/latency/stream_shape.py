"""Does a hop change the stream? Judged against the same run's direct requests.

A layer can add almost nothing to TTFT's median and still change what the user sees:
a proxy that buffers (gzip on an event stream, small buffers, an HTTP/1.0 upstream)
holds the events and passes them on in bursts — more tokens per read, inter-token gaps
collapsed to 0 ms inside a burst, and in the worst case the first token held until a
flush near the end. Each arm of an interleaved run (`analysis.arms`) is compared with
the direct arm on three figures (`reads.summarise_reads` counts the reads):

- tokens per read (content events per read);
- same-read gaps: the share of inter-token gaps of exactly 0 ms (two events in one
  read);
- where the first token landed: the arm's extra TTFT at p50 as a share of the direct
  arm's decode time at p50 (E2E − TTFT): near 0 the first token came as the server
  wrote it, near 1 it was held until the end of the answer (a flush).

The thresholds below are fixed, not fitted: a hop changes the stream when tokens per
read at least doubles (and grows by at least one), or same-read gaps grow by at least
25 points, or the first token moved by at least half the decode time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from zerohop.analysis.latency.reads import summarise_reads
from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.run_data import RunData

READS_RATIO = 2.0  # tokens per read, through ÷ direct, at or above which it changed
READS_MIN_GAIN = 1.0  # ... and at least this many more tokens per read
SAME_READ_POINTS = 25.0  # same-read gaps: percentage points more than direct
FLUSH_SHARE = 0.5  # extra TTFT ≥ this share of the direct decode time: held to a flush


@dataclass(frozen=True)
class StreamShape:
    """One arm's delivery beside the direct arm's, and the verdict."""

    arm: str
    tokens_per_read: float
    direct_tokens_per_read: float
    same_read_pct: float
    direct_same_read_pct: float
    first_token_shift: float  # extra TTFT p50 ÷ direct decode time p50 (nan: unknown)
    changed: bool
    reasons: tuple[str, ...]


def stream_shapes(views: dict[str, RunData], base: str = "direct") -> list[StreamShape]:
    """Each non-base arm's StreamShape against `base` (arm → view, as `arm_views`)."""
    if base not in views:
        return []
    direct = _delivery(views[base])
    out = []
    for arm, view in views.items():
        if arm == base:
            continue
        through = _delivery(view)
        shift = _first_token_shift(views[base], view)
        reasons = []
        if (through[0] >= READS_RATIO * direct[0]
                and through[0] - direct[0] >= READS_MIN_GAIN):
            reasons.append(f"tokens per read {direct[0]:.2f} → {through[0]:.2f}")
        if through[1] - direct[1] >= SAME_READ_POINTS:
            reasons.append(f"gaps collapsed into bursts: same-read gaps "
                           f"{direct[1]:.0f}% → {through[1]:.0f}%")
        if math.isfinite(shift) and shift >= FLUSH_SHARE:
            reasons.append(f"first token moved to a flush: {100 * shift:.0f}% of the "
                           "decode time later")
        out.append(StreamShape(arm=arm, tokens_per_read=through[0],
                               direct_tokens_per_read=direct[0], same_read_pct=through[1],
                               direct_same_read_pct=direct[1], first_token_shift=shift,
                               changed=bool(reasons), reasons=tuple(reasons)))
    return out


def _delivery(view: RunData) -> tuple[float, float]:
    """(tokens per read, same-read gap %) over the view's ok requests."""
    rows = summarise_reads(view.requests, view.itl, [ALL_WORKLOADS])
    if not rows or rows[0].reads == 0:
        return math.nan, math.nan
    row = rows[0]
    return row.tokens_per_read, row.same_read_pct


def _first_token_shift(direct: RunData, through: RunData) -> float:
    def p50(view: RunData, column: str) -> float:
        frame = view.requests
        values = frame.loc[frame["outcome"] == "ok", column].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        return float(np.median(values)) if values.size else math.nan

    decode = p50(direct, "e2e_ms") - p50(direct, "ttft_ms")
    extra = p50(through, "ttft_ms") - p50(direct, "ttft_ms")
    if not (math.isfinite(decode) and math.isfinite(extra)) or decode <= 0:
        return math.nan
    return extra / decode
