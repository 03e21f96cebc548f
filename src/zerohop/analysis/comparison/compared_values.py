"""The values `zerohop compare` reads of one run, by rank.

Each compared figure is an order statistic of a metric's finite values over a
workload's `ok` requests (or all of them): the percentiles and the CDF points
(numpy's linear quantiles) and the bootstrap's bands of ranks around each
percentile. So a side of a comparison is an `OrderedSample`, n values read by rank:

- a request metric (TTFT, TPOT, E2E) is sorted once per workload, and `all` merged
  from the sorted parts;
- the ITL gaps between reads (the gaps > 0 ms) are hundreds of millions at a
  nightly hour: never pooled or sorted. `rank_select.GroupedRanks` counts them per
  workload (from their float32 shadows), then fetches every rank the comparison
  reads of every workload and of `all` in one pass over the exact gaps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from zerohop.analysis.bootstrap import band_ranks, order_statistic_draws
from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.quantiles import CDF_GRID, PERCENTILES, linear_positions, numpy_lerp
from zerohop.analysis.rank_select import GroupedRanks
from zerohop.analysis.run_data import ItlColumn, RunData, category_codes

QS: tuple[float, ...] = tuple(q / 100.0 for _, q in PERCENTILES)  # as np.percentile's
_FRACTIONS = np.concatenate([QS, CDF_GRID])


class OrderedSample:
    """`n` finite values in ascending order, read by 0-based rank."""

    def __init__(self, n: int, read: Callable[[np.ndarray], np.ndarray]) -> None:
        self.n = n
        self._read = read

    @classmethod
    def of_sorted(cls, values: np.ndarray) -> OrderedSample:
        """The values of a sorted array (shared, not copied)."""
        return cls(values.size, values.__getitem__)

    @classmethod
    def of_ranks(cls, n: int, ranks: np.ndarray, values: np.ndarray) -> OrderedSample:
        """A sample known only at `ranks` (ascending, distinct): reading another
        rank is a bug in the caller."""
        def read(wanted: np.ndarray) -> np.ndarray:
            where = np.searchsorted(ranks, wanted)
            if where.size and (where.max() >= ranks.size
                               or (ranks[where] != wanted).any()):
                raise KeyError("a rank the comparison did not fetch")
            return values[where]
        return cls(n, read)

    def at(self, ranks: np.ndarray) -> np.ndarray:
        return self._read(np.asarray(ranks, dtype=np.int64))

    def figures(self) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """`np.percentile` at PERCENTILES and the CDF at CDF_GRID (numpy's own
        arithmetic, bit for bit); NaN percentiles and an empty CDF without values."""
        if self.n == 0:
            return np.full(len(QS), np.nan), (np.array([]), np.array([]))
        low, high, weight = linear_positions(self.n, _FRACTIONS)
        points = numpy_lerp(self.at(low), self.at(high), weight)
        return points[: len(QS)], (points[len(QS) :], CDF_GRID.copy())

    def draws(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Bootstrap draws of each percentile (`bootstrap.order_statistic_draws`)."""
        return order_statistic_draws(
            self.n, lambda lo, hi: self.at(np.arange(lo - 1, hi)), QS, n_draws, rng)


def read_ranks(n: int) -> np.ndarray:
    """Every 0-based rank `figures` and `draws` read of `n` values, ascending."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    low, high, _ = linear_positions(n, _FRACTIONS)
    return np.unique(np.concatenate([low, high, band_ranks(n, QS)]))


class ComparedValues:
    """One run's samples, per (workload, metric): `ALL_WORKLOADS` is every `ok`
    request, an unnamed workload's too; a workload the run lacks is empty."""

    def __init__(self, run: RunData) -> None:
        codes, self._names = category_codes(run.requests["workload"])
        ok = (run.requests["outcome"] == "ok").to_numpy()
        self._unnamed = len(self._names)  # ok requests without a workload: only in `all`
        self._groups = np.where(ok, np.where(codes >= 0, codes, self._unnamed),
                                self._unnamed + 1)  # the last group: not ok
        self._sorted: dict[tuple[str, str], np.ndarray] = {}  # (metric, workload)
        self._gaps = self._fetch_gaps(run.itl)
        # the gap column is read: a caller that lets its run go frees it (gigabytes)
        self.run = dataclasses.replace(run, itl=ItlColumn.empty(len(run.requests)))

    def sample(self, workload: str, metric: str) -> OrderedSample:
        if metric == "itl_ms":
            return self._gaps.get(workload, OrderedSample.of_sorted(np.empty(0)))
        if (metric, ALL_WORKLOADS) not in self._sorted:
            self._sort(metric)
        return OrderedSample.of_sorted(self._sorted.get((metric, workload), np.empty(0)))

    def _members(self, workload: str) -> list[int]:
        if workload == ALL_WORKLOADS:
            return list(range(self._unnamed + 1))
        return [self._names.index(workload)] if workload in self._names else []

    def _sort(self, metric: str) -> None:
        """The metric's finite values of each workload and of `all`, sorted: one
        stable radix sort by group, each group's slice sorted in place, then `all`
        merged from the sorted slices (a stable sort of sorted runs is a merge)."""
        values = self.run.requests[metric].to_numpy(dtype=float)
        keep = np.isfinite(values) & (self._groups <= self._unnamed)
        groups, values = self._groups[keep], values[keep]
        narrow = groups.astype(np.int16) if self._unnamed < 2**15 else groups
        values = values[np.argsort(narrow, kind="stable")]
        bounds = np.cumsum(np.bincount(groups, minlength=self._unnamed + 1))
        parts = np.split(values, bounds[:-1])  # views: sorted in place, `values` with them
        for part in parts:
            part.sort()
        # the last part, ok requests without a workload, is only in `all`
        self._sorted.update({(metric, name): part
                             for name, part in zip(self._names, parts[:-1], strict=True)})
        self._sorted[(metric, ALL_WORKLOADS)] = np.sort(values, kind="stable")

    def _fetch_gaps(self, itl: ItlColumn) -> dict[str, OrderedSample]:
        """The finite gaps > 0 of each workload and of `all`: every rank they are
        read at, in one histogram pass and one exact pass over the gap column."""
        narrow = np.int16 if self._unnamed + 2 < 2**15 else np.int32
        ranks = GroupedRanks(itl, self._groups.astype(narrow), self._unnamed + 2)
        wanted = {name: self._members(name) for name in [*self._names, ALL_WORKLOADS]}
        queries, sizes = [], []
        for members in wanted.values():
            below = int(ranks.negative_counts[members].sum() + ranks.zeros[members].sum())
            n = ranks.finite(members) - below
            read = read_ranks(n)
            queries.append((members, read + below))  # past the negatives and the zeros
            sizes.append((n, read))
        found = ranks.select(queries)
        return {name: OrderedSample.of_ranks(n, read, values)
                for name, (n, read), values in zip(wanted, sizes, found, strict=True)}
