"""Each workload's pooled ITL gaps, sorted once, for every figure read from them.

A nightly hour at 3k req/s pools ~300 million gaps. The summary (pooled ITL per
workload and for `all`), the read-delivery section (the gaps between reads, i.e.
without the 0 ms same-read gaps) and an ITL SLO all want exact quantiles of the same
gaps; sorting each workload's gaps once serves them all. The `all` row is selected
across the workloads' sorted arrays (`quantiles.describe_sorted`), and the gaps
between reads are the sorted array less its block of zeros, so neither costs another
copy. Held only while the run is summarised: the arrays together are as large as
the run's ITL column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from zerohop.analysis.quantiles import Distribution, describe_sorted, quantiles_sorted
from zerohop.analysis.run_data import ItlColumn, category_codes

BLOCK_ROWS = 100_000  # requests per step of a pass over the gap column (~3M gaps)


class ItlPools:
    """The finite gaps of each workload's `ok` requests, sorted."""

    def __init__(self, requests: pd.DataFrame, itl: ItlColumn) -> None:
        codes, names = category_codes(requests["workload"])
        ok = (requests["outcome"] == "ok").to_numpy()
        narrow = np.int16 if len(names) < 2**15 else np.int32
        row_codes = np.where(ok, codes, -1).astype(narrow)
        self._sorted: dict[str, np.ndarray] = {}
        self._non_finite: dict[str, int] = {}
        for code, pool in enumerate(_gather(itl, row_codes, len(names))):
            if pool.size:
                self._sorted[names[code]] = finite = _sorted_finite(pool)
                self._non_finite[names[code]] = pool.size - finite.size

    def non_finite(self, workloads: Sequence[str] | None) -> int:
        """How many of the named workloads' gaps are NaN or infinite (none in a sound
        run): in the gap counts, not in the distributions."""
        names = self._non_finite if workloads is None else workloads
        return sum(self._non_finite.get(name, 0) for name in names)

    def segments(self, workloads: Sequence[str] | None, *, between_reads: bool) -> list[np.ndarray]:
        """Sorted views of the named workloads' gaps (None: every workload); with
        `between_reads`, without the 0 ms gaps (the block of zeros cut out)."""
        names = self._sorted if workloads is None else workloads
        out = []
        for name in names:
            values = self._sorted.get(name)
            if values is None:
                continue
            if between_reads:
                lo, hi = np.searchsorted(values, 0.0, "left"), np.searchsorted(values, 0.0, "right")
                out += [values[:lo], values[hi:]]
            else:
                out.append(values)
        return [s for s in out if s.size]

    def distribution(
        self,
        workloads: Sequence[str] | None,
        *,
        with_cdf: bool = False,
        between_reads: bool = False,
    ) -> Distribution:
        """Exact `describe` of the named workloads' pooled gaps (None: all of them)."""
        return describe_sorted(
            self.segments(workloads, between_reads=between_reads), with_cdf=with_cdf
        )

    def quantile(self, workloads: Sequence[str] | None, fraction: float) -> float:
        """One exact quantile (numpy's linear interpolation), NaN without gaps."""
        segments = self.segments(workloads, between_reads=False)
        if not segments:
            return float("nan")
        return float(quantiles_sorted(segments, np.array([fraction]))[0])


def longest_zero_runs(itl: ItlColumn) -> np.ndarray:
    """Per request, the longest run of consecutive 0 ms gaps (events that came in
    the previous event's read). A block of requests at a time, so the bookkeeping
    never spans the whole gap column."""
    n = itl.offsets.size - 1
    out = np.zeros(n, dtype=np.int64)
    for first in range(0, n, BLOCK_ROWS):
        last = min(first + BLOCK_ROWS, n)
        start = int(itl.offsets[first])
        zeros = np.flatnonzero(itl.values[start : int(itl.offsets[last])] == 0.0) + start
        if zeros.size == 0:
            continue
        row = np.searchsorted(itl.offsets, zeros, side="right") - 1
        new_run = np.ones(zeros.size, dtype=bool)
        new_run[1:] = (np.diff(zeros) != 1) | (np.diff(row) != 0)
        run_id = np.cumsum(new_run) - 1
        np.maximum.at(out, row[new_run], np.bincount(run_id))
    return out


def _gather(itl: ItlColumn, row_codes: np.ndarray, n_codes: int) -> list[np.ndarray]:
    """The gaps of the requests of each code (-1: none) in one array per code, in one
    pass over the gap column a block of requests at a time: each gap is read once,
    straight into its array, and the per-gap bookkeeping stays a few MB that the
    allocator reuses (the order within a code is not kept: the arrays are sorted)."""
    lengths = itl.lengths
    chosen = row_codes >= 0
    totals = np.bincount(row_codes[chosen], weights=lengths[chosen], minlength=n_codes)
    pools = [np.empty(int(total)) for total in totals]
    filled = [0] * n_codes
    codes = np.flatnonzero(totals)
    n = lengths.size
    for first in range(0, n, BLOCK_ROWS):
        last = min(first + BLOCK_ROWS, n)
        gaps = itl.values[int(itl.offsets[first]) : int(itl.offsets[last])]
        gap_codes = np.repeat(row_codes[first:last], lengths[first:last])
        for code in codes:
            take = gap_codes == code
            count = int(np.count_nonzero(take))
            np.compress(take, gaps, out=pools[code][filled[code] : filled[code] + count])
            filled[code] += count
    return pools


def _sorted_finite(values: np.ndarray) -> np.ndarray:
    """`values` (a private copy) sorted in place, NaN and infinities cut off the ends."""
    values.sort()
    lo = np.searchsorted(values, -np.inf, "right")
    hi = np.searchsorted(values, np.inf, "left")
    return values[lo:hi]
