"""The per-token gaps of every request, held as float32 with the exact float64 a pass away.

A nightly hour holds ~310 million gaps: 2.5 GB as float64, 1.25 GB as float32. A
gap in ms rounded to float32 keeps ~7 significant digits (relative error ≤ 6e-8),
enough to find where a quantile lies but not to print it exactly. So the column
read from requests.parquet keeps a float32 *shadow* of each gap in memory, and every
figure that prints a gap's value reads the exact float64 gaps again, a block of
requests at a time, from the file (`exact_blocks`). The shadow keeps what the
tests on it need exactly: it is 0 where the gap is 0 (and only there), negative,
finite and NaN exactly where the gap is, and ordered as the gaps are (rounding to
nearest never reverses two values), so counting zeros, per-bucket histograms and
the zero runs read it directly. A column built in memory (tests, the JSONL sinks)
holds its float64 gaps, which are their own exact values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from zerohop.analysis.input_error import ReportInputError

ExactSource = Callable[[int], Iterator[np.ndarray]]  # batch rows → flat float64 gaps, in order
_TINY = np.float32(1e-45)  # float32's least subnormal: where a nonzero gap would underflow
_HUGE = np.finfo(np.float32).max


def shadow(values: np.ndarray) -> np.ndarray:
    """float32 of float64 gaps, rounded to nearest, but never 0 for a nonzero gap nor
    infinite for a finite one (those clamp to float32's least or largest value)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out = np.asarray(values, dtype=np.float64).astype(np.float32)
    zero = out == 0.0
    if zero.any():
        lost = zero & (values != 0.0)
        out[lost] = np.copysign(_TINY, values[lost])
    infinite = np.isinf(out)
    if infinite.any():
        grew = infinite & np.isfinite(values)
        out[grew] = np.copysign(_HUGE, values[grew])
    return out


class ItlColumn:
    """The `itl_ms` lists of every request, flattened: request i owns
    `values[offsets[i]:offsets[i + 1]]`. Kept out of the DataFrame because a million
    Python lists would cost more than the whole rest of the report. `values` is
    float64 (exact), or float32 (`shadow`) with `exact_source` giving the float64 gaps
    again, in order, in batches of about the rows asked for; shadows can be dropped
    while nothing needs them (`release`) and are read again when next asked for."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray,
                 exact_source: ExactSource | None = None) -> None:
        if values.dtype != np.float64 and exact_source is None:
            raise ValueError("an ITL column that is not float64 needs its exact source")
        self._values: np.ndarray | None = values
        self.offsets = offsets
        self.exact_source = exact_source

    @property
    def values(self) -> np.ndarray:
        """The gaps as held: float64, or float32 shadows (read again if released)."""
        if self._values is None:  # released: the shadows read again
            shadows = np.empty(int(self.offsets[-1]), dtype=np.float32)
            for first, exact in self.exact_blocks(_BLOCK):
                shadows[int(self.offsets[first]) : int(self.offsets[first]) + exact.size] = (
                    shadow(exact))
            self._values = shadows
        return self._values

    def release(self) -> None:
        """Drop the shadows (1.25 GB at ten million requests) until next asked for: a
        column of exact float64 values, which cannot be read again, is kept."""
        if self.exact_source is not None:
            self._values = None

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def exact_blocks(self, block_rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first request, the exact float64 gaps of requests [first, first +
        block_rows)) for every block in order: views of `values` when they are exact,
        else read again from the source."""
        offsets, n = self.offsets, self.offsets.size - 1
        if self.exact_source is None:
            for first in range(0, n, block_rows):
                last = min(first + block_rows, n)
                yield first, self.values[int(offsets[first]) : int(offsets[last])]
            return
        pending: list[np.ndarray] = []
        have = first = 0
        for flat in self.exact_source(block_rows):
            pending.append(flat)
            have += flat.size
            while first < n:
                last = min(first + block_rows, n)
                need = int(offsets[last] - offsets[first])
                if have < need:
                    break
                joined = np.concatenate(pending) if len(pending) > 1 else pending[0]
                yield first, joined[:need]
                pending, have, first = [joined[need:]], have - need, last
        if have or (first < n and int(offsets[n] - offsets[first])):
            raise ReportInputError("requests.parquet changed while the report read it (its "
                                   "per-token gaps differ from the first read): run it again")
        for rest in range(first, n, block_rows):  # trailing requests without gaps
            yield rest, np.empty(0)

    def pooled(self, row_mask: np.ndarray) -> np.ndarray:
        """All exact gaps of the selected requests in one array (ITL is pooled across
        requests)."""
        mask = np.asarray(row_mask, dtype=bool)
        lengths = self.lengths
        out = np.empty(int(lengths[mask].sum()))
        pos = 0
        for first, values in self.exact_blocks(_BLOCK):
            rows = slice(first, first + _BLOCK)
            picked = values[np.repeat(mask[rows], lengths[rows])]
            out[pos : pos + picked.size] = picked
            pos += picked.size
        return out

    def row_max(self) -> np.ndarray:
        """Largest exact gap of each request (NaN where a request has none)."""
        lengths = self.lengths
        out = np.full(lengths.size, np.nan)
        for first, values in self.exact_blocks(_BLOCK):
            own = lengths[first : first + _BLOCK]
            nonempty = own > 0
            if values.size:
                starts = (np.cumsum(own) - own)[nonempty]
                out[first : first + own.size][nonempty] = np.maximum.reduceat(values, starts)
        return out

    def zero_counts(self) -> np.ndarray:
        """How many of each request's gaps are exactly 0 ms (a shadow is 0 exactly
        where its gap is), a block of requests at a time."""
        offsets, lengths = self.offsets, self.lengths
        out = np.zeros(lengths.size, dtype=np.int64)
        for first in range(0, lengths.size, _BLOCK):
            own = lengths[first : first + _BLOCK]
            zero = self.values[int(offsets[first]) : int(offsets[first + own.size])] == 0.0
            nonempty = own > 0
            if zero.size:
                starts = (np.cumsum(own) - own)[nonempty]
                out[first : first + own.size][nonempty] = np.add.reduceat(
                    zero.astype(np.int32), starts)
        return out

    @classmethod
    def empty(cls, n_rows: int) -> ItlColumn:
        return cls(values=np.array([], dtype=float), offsets=np.zeros(n_rows + 1, np.int64))

    @classmethod
    def concat(cls, columns: Sequence[ItlColumn]) -> ItlColumn:
        """Several runs' columns as one (their requests one after another)."""
        offsets = [np.zeros(1, np.int64)]
        shift = 0
        for column in columns:
            offsets.append(column.offsets[1:] + shift)
            shift += int(column.offsets[-1])
        if all(c.exact_source is None for c in columns):
            return cls(np.concatenate([c.values for c in columns]), np.concatenate(offsets))

        def source(batch_rows: int) -> Iterator[np.ndarray]:
            for column in columns:
                for _first, values in column.exact_blocks(batch_rows):
                    yield values

        values = np.concatenate([c.values.astype(np.float32, copy=False) if c.exact_source
                                 else shadow(c.values) for c in columns])
        return cls(values, np.concatenate(offsets), source)


_BLOCK = 65_536  # requests per step of a pass over the exact gaps (~2M gaps)
