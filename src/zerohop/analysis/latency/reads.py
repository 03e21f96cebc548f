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

from zerohop.analysis.itl_pools import ItlPools, longest_zero_runs
from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.quantiles import Distribution
from zerohop.analysis.run_data import ItlColumn, category_codes


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
    requests: pd.DataFrame,
    itl: ItlColumn,
    workloads: Sequence[str],
    pools: ItlPools | None = None,
    zero_runs: np.ndarray | None = None,
) -> list[ReadDelivery]:
    """One ReadDelivery per name in `workloads` (`all` = every request), in order.
    `pools`: the run's sorted gaps when already built (`ItlPools`); `zero_runs`: each
    request's `longest_zero_runs`, when already counted."""
    if pools is None:
        pools = ItlPools(requests, itl)
    codes, names = category_codes(requests["workload"])
    lengths = itl.lengths
    rows = (requests["outcome"] == "ok").to_numpy() & (lengths > 0)
    if zero_runs is None:
        zero_runs = longest_zero_runs(itl)
    out = []
    for workload in workloads:
        if workload == ALL_WORKLOADS:
            mask, selected = rows, None
        else:
            code = names.index(workload) if workload in names else -2
            mask, selected = rows & (codes == code), [workload]
        between = pools.distribution(selected, with_cdf=True, between_reads=True)
        n_requests = int(mask.sum())
        gaps = int(lengths[mask].sum())
        same = gaps - between.n - pools.non_finite(selected)
        out.append(
            ReadDelivery(
                workload=workload,
                gaps=gaps,
                same_read_gaps=same,
                reads=n_requests + gaps - same,
                events=gaps + n_requests,
                max_events_per_read=int(zero_runs[mask].max()) + 1 if gaps else 0,
                between_reads=between,
            )
        )
    return out

