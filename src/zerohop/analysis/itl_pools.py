"""Each workload's pooled ITL gaps, for every figure read from them, exactly.

A nightly hour at 3k req/s pools ~300 million gaps. The summary (pooled ITL per
workload and for `all`), the read-delivery section (the gaps between reads, i.e.
without the 0 ms same-read gaps) and an ITL SLO all want exact quantiles of the same
gaps. Sorting them would need a second copy of the column (gigabytes); instead
`rank_select.GroupedRanks` counts them per bucket in one pass and fetches the few
ranks every figure needs in another, for all of those figures at once, over the
column where it lies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from zerohop.analysis.quantiles import CDF_GRID, PERCENTILES, Distribution, linear_positions
from zerohop.analysis.rank_select import GroupedRanks
from zerohop.analysis.run_data import ItlColumn, category_codes

BLOCK_ROWS = 100_000  # requests per step of a pass over the gap column (~3M gaps)
_NAMED = np.array([q / 100.0 for _, q in PERCENTILES])
_Key = tuple[tuple[int, ...], bool]  # (groups, between reads)


class ItlPools:
    """The finite gaps of each workload's `ok` requests, described on demand; each
    workload's and the run's distributions (all gaps and between reads, with CDF)
    are found in one pass when the pools are built."""

    def __init__(self, requests: pd.DataFrame, itl: ItlColumn) -> None:
        codes, names = category_codes(requests["workload"])
        ok = (requests["outcome"] == "ok").to_numpy()
        ignored = len(names)  # failed requests and unnamed workloads: nobody's pool
        narrow = np.int16 if len(names) < 2**15 else np.int32
        row_codes = np.where(ok & (codes >= 0), codes, ignored).astype(narrow)
        self._names = names
        self._ranks = GroupedRanks(itl, row_codes, len(names) + 1)
        self._cache: dict[_Key, Distribution] = {}
        present = [g for g in range(len(names)) if self._ranks.finite([g])
                   or self._ranks.non_finite[g]]
        everyone = tuple(range(len(names)))
        keys: list[_Key] = [((g,), between) for g in present for between in (False, True)]
        keys += [(everyone, False), (everyone, True)] if len(present) > 1 else []
        self._describe_all(keys)

    def non_finite(self, workloads: Sequence[str] | None) -> int:
        """How many of the named workloads' gaps are NaN or infinite (none in a sound
        run): in the gap counts, not in the distributions."""
        return int(self._ranks.non_finite[list(self._groups(workloads))].sum())

    def distribution(
        self,
        workloads: Sequence[str] | None,
        *,
        with_cdf: bool = False,
        between_reads: bool = False,
    ) -> Distribution:
        """Exact `describe` of the named workloads' pooled gaps (None: all of them);
        with `between_reads`, without the 0 ms gaps."""
        key = (self._groups(workloads), between_reads)
        if key not in self._cache:
            self._describe_all([key])
        found = self._cache[key]
        if with_cdf or found.cdf is None:
            return found
        return Distribution(found.n, found.mean, found.min, found.max, found.percentiles)

    def quantile(self, workloads: Sequence[str] | None, fraction: float) -> float:
        """One exact quantile (numpy's linear interpolation), NaN without gaps."""
        groups = self._groups(workloads)
        named = np.flatnonzero(fraction == _NAMED)
        if named.size:
            return self.distribution(workloads).percentiles[PERCENTILES[named[0]][0]]
        n = self._ranks.finite(groups)
        if n == 0:
            return float("nan")
        low, high, frac = linear_positions(n, np.array([fraction]))
        got = self._ranks.select([(groups, np.concatenate([low, high]))])[0]
        return float(_interpolate(got[:1], got[1:], frac)[0])

    def _groups(self, workloads: Sequence[str] | None) -> tuple[int, ...]:
        if workloads is None:
            return tuple(range(len(self._names)))
        return tuple(sorted({self._names.index(w) for w in workloads if w in self._names}))

    def _describe_all(self, keys: Sequence[_Key]) -> None:
        """The distributions of `keys`, every rank of them fetched in one pass."""
        fractions = np.concatenate([_NAMED, CDF_GRID])
        queries: list[tuple[tuple[int, ...], np.ndarray]] = []
        shapes: list[tuple[int, np.ndarray] | None] = []
        for groups, between in keys:
            n = self._ranks.finite(groups)
            zeros = int(self._ranks.zeros[list(groups)].sum())
            n_between = n - zeros if between else n
            if n_between == 0:
                shapes.append(None)
                continue
            low, high, frac = linear_positions(n_between, fractions)
            ranks = np.concatenate([[0, n_between - 1], low, high])
            if between:  # past the negatives, a rank skips the block of zeros
                n_neg = int(self._ranks.negative_counts[list(groups)].sum())
                ranks = np.where(ranks < n_neg, ranks, ranks + zeros)
            queries.append((groups, ranks))
            shapes.append((n_between, frac))
        found = iter(self._ranks.select(queries))
        for (groups, between), shape in zip(keys, shapes, strict=True):
            self._cache[(groups, between)] = _distribution(
                shape, None if shape is None else next(found),
                float(self._ranks.sums[list(groups)].sum()))


def _interpolate(low: np.ndarray, high: np.ndarray, frac: np.ndarray) -> np.ndarray:
    return low + (high - low) * frac


def _distribution(shape: tuple[int, np.ndarray] | None, values: np.ndarray | None,
                  total: float) -> Distribution:
    if shape is None or values is None:
        nan = float("nan")
        return Distribution(0, nan, nan, nan, {name: nan for name, _ in PERCENTILES})
    n, frac = shape
    k = frac.size
    points = _interpolate(values[2 : 2 + k], values[2 + k :], frac)
    named = len(PERCENTILES)
    return Distribution(
        n=n,
        mean=total / n,
        min=float(values[0]),
        max=float(values[1]),
        percentiles={name: float(v) for (name, _), v in zip(PERCENTILES, points[:named],
                                                            strict=True)},
        cdf=(points[named:], CDF_GRID.copy()),
    )


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
