"""The values `zerohop compare` reads of one run: each metric's over a workload's ok
requests, sorted, and the ITL between reads of every workload from one pass over the
run's exact gaps.

`zerohop compare` reads every percentile of the gaps between reads (the gaps > 0 ms of
`ok` requests) of each shared workload and of `all`, for both runs. Pooling them per
workload read the exact gaps once per workload (from requests.parquet, when the run
holds float32 shadows: `itl_column`) and sorted `all` from scratch. Here one pass
splits them by workload, each part is sorted once, and `all` merges the sorted parts
(a stable sort of sorted runs is a merge): the same values, in the same order.
"""

from __future__ import annotations

import numpy as np

from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.run_data import RunData, category_codes

BLOCK_ROWS = 65_536  # requests per step of the pass (~2M gaps)


class GapsBetweenReads:
    """The sorted gaps > 0 of one run's ok requests, per workload name."""

    def __init__(self, run: RunData) -> None:
        codes, self._names = category_codes(run.requests["workload"])
        ok = (run.requests["outcome"] == "ok").to_numpy()
        unnamed = len(self._names)  # ok requests without a workload: only in `all`
        rows = np.where(ok, np.where(codes >= 0, codes, unnamed), -1)
        lengths = run.itl.lengths
        parts: list[list[np.ndarray]] = [[] for _ in range(unnamed + 1)]
        for first, values in run.itl.exact_blocks(BLOCK_ROWS):
            owner = np.repeat(rows[first : first + BLOCK_ROWS],
                              lengths[first : first + BLOCK_ROWS])
            kept = values > 0.0  # NaN out, +inf in: as a pooled copy filtered `> 0`
            owner, values = owner[kept], values[kept]
            for group in np.unique(owner[owner >= 0]):
                parts[group].append(values[owner == group])
        self._sorted = [np.sort(np.concatenate(p)) if p else np.empty(0) for p in parts]

    def of(self, workload: str | None) -> np.ndarray:
        """The named workload's gaps (None: every ok request's), sorted; shared, not
        a copy: read them, never write them."""
        if workload is None:
            joined = np.concatenate(self._sorted)
            joined.sort(kind="stable")  # sorted runs: merged, not sorted from scratch
            return joined
        if workload not in self._names:
            return np.empty(0)
        return self._sorted[self._names.index(workload)]


def ok_values(run: RunData, workload: str, metric: str,
              gaps: GapsBetweenReads | None = None) -> np.ndarray:
    """The metric's values, sorted (its figures are order statistics), over `ok` requests
    of one workload (or all). ITL: the gaps between reads, 0 ms same-read gaps left out
    (from `gaps`, the run's already sorted, when given: then not a private copy)."""
    if metric == "itl_ms" and gaps is not None:
        return gaps.of(None if workload == ALL_WORKLOADS else workload)
    mask = (run.requests["outcome"] == "ok").to_numpy()
    if workload != ALL_WORKLOADS:
        mask = mask & (run.requests["workload"] == workload).to_numpy()
    if metric == "itl_ms":
        values = (pooled := run.itl.pooled(mask))[pooled > 0]
    else:
        values = run.requests[metric].to_numpy(dtype=float)[mask]
        values = values[np.isfinite(values)]
    values.sort()  # in place: a private copy
    return values
