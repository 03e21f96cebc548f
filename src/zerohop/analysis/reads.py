"""How content arrived: tokens per read, and the ITL gaps that are not latencies.

Events that reached the client in one read share that read's timestamp
(`http_stream.py`), so two tokens the server sent together show up as an ITL gap of
exactly 0 ms. That gap is a fact about delivery (the server or a proxy batched them,
or the client read late), not a token that took no time; the report says how many
gaps are such same-read gaps and gives the ITL between reads beside the pooled ITL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.quantiles import Distribution, describe
from zerohop.analysis.run_data import ItlColumn, category_codes
from zerohop.analysis.summary import ALL_WORKLOADS


@dataclass(frozen=True)
class ReadDelivery:
    """Content delivery of one workload's ok requests that have at least one gap."""

    workload: str
    gaps: int
    same_read_gaps: int  # gaps of exactly 0 ms: the event came in the previous one's read
    reads: int
    events: int
    max_events_per_read: int
    between_reads: Distribution  # ITL over the gaps between reads (> 0 ms), with CDF

    @property
    def tokens_per_read(self) -> float:
        """Content events per read (a token per event for most servers)."""
        return self.events / self.reads if self.reads else math.nan

    @property
    def same_read_pct(self) -> float:
        return 100.0 * self.same_read_gaps / self.gaps if self.gaps else math.nan


def summarise_reads(
    requests: pd.DataFrame, itl: ItlColumn, workloads: Sequence[str]
) -> list[ReadDelivery]:
    """One ReadDelivery per name in `workloads` (`all` = every request), in order."""
    codes, names = category_codes(requests["workload"])
    ok = (requests["outcome"] == "ok").to_numpy()
    out = []
    for workload in workloads:
        if workload == ALL_WORKLOADS:
            mask = ok
        else:
            mask = ok & (codes == names.index(workload)) if workload in names else ok & False
        out.append(_delivery(workload, itl, mask))
    return out


def _delivery(workload: str, itl: ItlColumn, mask: np.ndarray) -> ReadDelivery:
    lengths = itl.lengths
    rows = mask & (lengths > 0)
    gaps = itl.pooled(rows)
    same = gaps == 0.0
    # a read starts at every gap > 0 and at every request's first gap; the zero gaps
    # that follow in the same request belong to that read
    starts = np.zeros(gaps.size, dtype=bool)
    row_lengths = lengths[rows]
    if row_lengths.size:
        starts[np.concatenate(([0], np.cumsum(row_lengths)[:-1]))] = True
    read_id = np.cumsum(starts | ~same) - 1
    zeros_per_read = (
        np.bincount(read_id, weights=same.astype(float)) if gaps.size else np.array([0.0])
    )
    n_requests = int(rows.sum())
    return ReadDelivery(
        workload=workload,
        gaps=int(gaps.size),
        same_read_gaps=int(same.sum()),
        reads=n_requests + int((~same).sum()),
        events=int(row_lengths.sum()) + n_requests,
        max_events_per_read=int(zeros_per_read.max()) + 1 if gaps.size else 0,
        between_reads=describe(gaps[~same], with_cdf=True),
    )
