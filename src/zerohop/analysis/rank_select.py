"""Exact order statistics of grouped per-token gaps without sorting or copying them.

A nightly hour pools ~300 million ITL gaps. Sorting each workload's gaps needs a
second copy of them all (2.5 GB at ten million requests) and the sorts' time. Every
figure read from them is a handful of ranks (p50…p99.9, min, max, the CDF's points),
so two passes over the column in place find them exactly:

1. a histogram of the column's float32 shadows (`itl_column.shadow`): each gap's
   bucket is its shadow's bit pattern (float64 → float32 rounds monotonically, so a
   bucket is a contiguous value range) shifted right by `KEY_SHIFT`; counted per
   group, with each group's zeros, negatives and non-finite gaps apart;
2. the buckets that hold the wanted ranks are marked, and one pass over the exact
   float64 gaps (`ItlColumn.exact_blocks`: read again from requests.parquet when
   the column holds shadows) keeps only those that fall in them (~2.5 % of the
   column at 1M records); sorted, they give the exact values at those ranks, as
   `np.sort` of the whole pool would.

Zeros (a same-read gap is exactly 0 ms) are counted, never collected: a rank inside
the block of zeros is 0.0. Sums (for means) are taken per request, then per group,
then over blocks with `math.fsum`: the same figure as a sum of the sorted pool to
~1e-15 relative (summation order differs; every quantile, min and max is bit-exact).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from zerohop.analysis.itl_column import ItlColumn, shadow

KEY_SHIFT = 10  # a bucket spans 1024 adjacent float32 values: ~1.2e-4 relative
MAX_CELLS = 16_000_000  # groups × buckets (128 MB of counts): more groups, wider buckets
BLOCK_ROWS = 300_000  # requests per partial sum of a mean (its rounding depends on it)
PASS_ROWS = 60_000  # requests per step of a pass (~2M gaps, ~40 MB of scratch)
_FLOOR_KEY = int(np.array([1e-6], np.float32).view(np.int32)[0])  # below: one bucket
_INF_KEY = 0x7F800000  # +inf's float32 key: the last finite value's is below it


@dataclass(frozen=True)
class _Buckets:
    """The float32 key shifted right by `shift`, clipped to [floor, top]: bucket 0
    holds every gap below 1e-6 (zeros and negatives too), the last one every gap
    beyond float32, infinities and NaN. Wider buckets keep more gaps for the exact
    pass, never a different answer."""

    shift: int

    @property
    def floor(self) -> int:
        return _FLOOR_KEY >> self.shift

    @property
    def top(self) -> int:
        return _INF_KEY >> self.shift

    @property
    def width(self) -> int:
        return self.top - self.floor + 1

    @classmethod
    def for_groups(cls, n_groups: int) -> _Buckets:
        shift = KEY_SHIFT
        while n_groups * cls(shift).width > MAX_CELLS:
            shift += 1
        return cls(shift)


class GroupedRanks:
    """Counts of each group's gaps (the histogram pass); `select` then finds exact
    ranks of any union of groups in one more pass. Every request has a group
    (`row_codes` in [0, n_groups)): give the requests nobody asks about one of
    their own."""

    def __init__(self, itl: ItlColumn, row_codes: np.ndarray, n_groups: int) -> None:
        self._itl = itl
        self._lengths = itl.lengths
        self._row_codes = np.asarray(row_codes)
        self.n_groups = n_groups
        self._buckets = _Buckets.for_groups(n_groups)
        self._hist = np.zeros((n_groups, self._buckets.width), dtype=np.int64)
        self.zeros = np.zeros(n_groups, dtype=np.int64)
        self.non_finite = np.zeros(n_groups, dtype=np.int64)
        self.negative_counts = np.zeros(n_groups, dtype=np.int64)
        self._negatives: list[list[np.ndarray]] = [[] for _ in range(n_groups)]
        self._sums: np.ndarray | None = None  # from the first exact pass
        for _first, values, rows in self._blocks():
            self._count(values, rows)

    @property
    def sums(self) -> np.ndarray:
        """Each group's sum of its finite gaps (exact values, summed per request,
        then per block, then with `math.fsum` over blocks)."""
        if self._sums is None:
            self.select([])
        assert self._sums is not None
        return self._sums

    def negatives(self, groups: Sequence[int]) -> np.ndarray:
        """The groups' negative gaps, exact and sorted (none in a sound run: kept
        whole, by the first exact pass)."""
        if self._sums is None:
            self.select([])
        parts = [part for g in groups for part in self._negatives[g]]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0)

    def finite(self, groups: Sequence[int]) -> int:
        """How many finite gaps the groups hold (zeros and negatives included)."""
        g = list(groups)
        return int(self._hist[g].sum() + self.zeros[g].sum() + self.negative_counts[g].sum())

    def select(self, queries: Sequence[tuple[Sequence[int], np.ndarray]]) -> list[np.ndarray]:
        """For each (groups, ranks): the values at those 0-based ranks of the groups'
        finite gaps sorted together (exact), in one pass over the exact gaps (the
        first pass also sums them and keeps the negatives)."""
        plans = [self._plan(list(groups), np.asarray(ranks, dtype=np.int64))
                 for groups, ranks in queries]
        width = self._buckets.width
        wanted = np.zeros((self.n_groups, width), dtype=bool)
        for plan in plans:
            for g in plan.groups:
                wanted[g, plan.buckets] = True
        kept_values, kept_cells = [], []
        first_pass = self._sums is None
        if wanted.any() or first_pass:
            flat = wanted.ravel()
            sums = _Sums(self._row_codes, self._lengths, self.n_groups)
            rows_of = self._rows()
            for first, values in self._itl.exact_blocks(PASS_ROWS):
                rows = rows_of(first, values.size)
                index = _index(values, rows, self._buckets)
                hit = flat[index]
                kept_values.append(values[hit])
                kept_cells.append(index[hit])
                if first_pass:
                    self._keep_negatives(values, rows)
                    sums.add(first, values)
            if first_pass:
                self._sums = sums.total()
        values = np.concatenate(kept_values) if kept_values else np.empty(0)
        cells = np.concatenate(kept_cells) if kept_cells else np.empty(0, np.int32)
        codes = cells // width
        return [plan.values(values, codes, self.negatives(plan.groups), self._buckets)
                for plan in plans]

    def _plan(self, groups: list[int], ranks: np.ndarray) -> _Plan:
        cumulative = np.cumsum(self._hist[groups].sum(axis=0))
        n_neg = int(self.negative_counts[groups].sum())
        n_zero = int(self.zeros[groups].sum())
        # ranks past the negatives and the zeros index the histogram of the positives
        positive = ranks >= n_neg + n_zero
        at = ranks[positive] - n_neg - n_zero
        buckets = np.searchsorted(cumulative, at, side="right")
        below = np.where(buckets > 0, cumulative[np.maximum(buckets - 1, 0)], 0)
        return _Plan(groups, ranks, n_neg, positive, np.unique(buckets), buckets, at - below)

    def _rows(self) -> Callable[[int, int], np.ndarray]:
        """Each gap's row in the table of a block that starts at request `first`:
        its group times the table's width, less the floor bucket, so that adding a
        gap's shifted key gives its cell."""
        lengths = self._lengths
        base = (self._row_codes.astype(np.int32) * self._buckets.width
                - self._buckets.floor)

        def rows(first: int, size: int) -> np.ndarray:
            last = first + PASS_ROWS
            out = np.repeat(base[first:last], lengths[first:last])
            if out.size != size:
                raise ValueError("the ITL gaps read again differ from the first read")
            return out

        return rows

    def _blocks(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first request, its block's float32 shadows as a view, each gap's row)."""
        offsets, n, rows = self._itl.offsets, self._lengths.size, self._rows()
        shadows = self._itl.values
        for first in range(0, n, PASS_ROWS):
            last = min(first + PASS_ROWS, n)
            values = shadows[int(offsets[first]) : int(offsets[last])]
            yield first, values, rows(first, values.size)

    def _count(self, values: np.ndarray, rows: np.ndarray) -> None:
        """One block of shadows into the histogram: every gap lands in a bucket, then
        the ones counted apart (zeros, negatives: bucket 0; non-finite: bucket 0 or
        the top one) are taken out of theirs. The shadow is 0, negative or
        non-finite exactly where the gap is."""
        n, buckets = self.n_groups, self._buckets
        index = _index(values, rows, buckets)
        self._hist += np.bincount(index, minlength=n * buckets.width).reshape(n, buckets.width)
        apart = np.flatnonzero(~np.isfinite(values) | (values <= 0.0))
        if apart.size:
            picked = values[apart]
            picked_codes = (rows[apart] + buckets.floor) // buckets.width
            top = index[apart] - rows[apart] == buckets.top  # NaN, +inf; the rest: bucket 0
            self._hist[:, 0] -= np.bincount(picked_codes[~top], minlength=n)
            self._hist[:, -1] -= np.bincount(picked_codes[top], minlength=n)
            self.zeros += np.bincount(picked_codes[picked == 0.0], minlength=n)
            self.non_finite += np.bincount(picked_codes[~np.isfinite(picked)], minlength=n)
            negative = np.isfinite(picked) & (picked < 0.0)
            self.negative_counts += np.bincount(picked_codes[negative], minlength=n)

    def _keep_negatives(self, values: np.ndarray, rows: np.ndarray) -> None:
        """One block of exact gaps' negatives, kept per group."""
        negative = np.flatnonzero(values < 0.0)
        negative = negative[np.isfinite(values[negative])]  # not -inf
        if negative.size:
            codes = (rows[negative] + self._buckets.floor) // self._buckets.width
            for g in np.unique(codes):
                self._negatives[g].append(values[negative[codes == g]])


class _Sums:
    """Each group's sum of its finite exact gaps: per request, then over each block
    of `BLOCK_ROWS` requests per group, then `math.fsum` over the blocks, whatever
    the size of the steps the gaps come in (`PASS_ROWS` divides `BLOCK_ROWS`)."""

    def __init__(self, row_codes: np.ndarray, lengths: np.ndarray, n_groups: int) -> None:
        self._row_codes, self._lengths, self._n = row_codes, lengths, n_groups
        self._blocks: list[list[float]] = [[] for _ in range(n_groups)]
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, first: int, values: np.ndarray) -> None:
        lengths = self._lengths[first : first + PASS_ROWS]
        nonempty = lengths > 0
        if values.size:
            finite = np.isfinite(values)
            if not finite.all():
                values = np.where(finite, values, 0.0)  # out of the sums
            starts = (np.cumsum(lengths) - lengths)[nonempty]
            per_request = np.add.reduceat(values, starts)  # short, sequential sums
            owner = self._row_codes[first : first + PASS_ROWS][nonempty]
            self._pending.append((per_request, owner))
        last = first + lengths.size
        if last % BLOCK_ROWS == 0 or last == self._lengths.size:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        per_request = np.concatenate([p for p, _ in self._pending])
        owner = np.concatenate([o for _, o in self._pending])
        self._pending = []
        for g in range(self._n):
            self._blocks[g].append(float(per_request[owner == g].sum()))

    def total(self) -> np.ndarray:
        self._flush()
        return np.array([math.fsum(s) for s in self._blocks], dtype=float)


@dataclass(frozen=True)
class _Plan:
    """Where each wanted rank of one union of groups lies: among the negatives, in
    the block of zeros (0.0), or at an offset inside one bucket of positives."""

    groups: list[int]
    ranks: np.ndarray
    n_neg: int
    positive: np.ndarray  # which ranks lie past the negatives and the zeros
    buckets: np.ndarray  # the distinct buckets those ranks fall in (to keep)
    rank_bucket: np.ndarray  # per positive rank: its bucket
    rank_offset: np.ndarray  # per positive rank: its index among the bucket's values

    def values(self, kept: np.ndarray, codes: np.ndarray, negatives: np.ndarray,
               buckets: _Buckets) -> np.ndarray:
        out = np.zeros(self.ranks.size)  # a rank in the block of zeros is 0.0
        # bucket 0 also holds the zeros and negatives, the top one the non-finite:
        # counted apart, so left out here
        mine = np.isin(codes, self.groups) & np.isfinite(kept) & (kept > 0.0)
        # a bucket is a range of values: sorted by value, the kept gaps are in bucket
        # order too, each bucket's block starting where its bucket first appears
        values = np.sort(kept[mine])
        where = _index(values, np.full(values.size, -buckets.floor, dtype=np.int32), buckets)
        first = np.searchsorted(where, self.rank_bucket, side="left")
        out[self.positive] = values[first + self.rank_offset]
        low = self.ranks < self.n_neg
        out[low] = negatives[self.ranks[low]]
        return out


def _index(values: np.ndarray, rows: np.ndarray, buckets: _Buckets) -> np.ndarray:
    """Each gap's cell in the (group, bucket) table, flattened (`rows` from
    `_blocks`; `_Buckets` says which bucket a gap's float32 key falls in)."""
    keys = shadow(values).view(np.int32) if values.dtype != np.float32 else (
        values.view(np.int32).copy())
    keys >>= buckets.shift
    np.clip(keys, buckets.floor, buckets.top, out=keys)
    keys += rows
    return keys
