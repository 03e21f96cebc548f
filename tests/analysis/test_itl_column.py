"""The ITL column as the reader holds it: float32 shadows that keep what is tested on
them (zero, sign, finiteness, order), exact float64 values read again in blocks of
any size, shadows dropped and read back unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from zerohop.analysis.input_error import ReportInputError
from zerohop.analysis.itl_column import ItlColumn, shadow

pytestmark = pytest.mark.unit

EDGES = np.array([0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e300, -1e300, np.inf, -np.inf, np.nan,
                  3.4e38, 14.0, 14.0 + 1e-12, 0.1, -2.5])


def _shadowed(values: np.ndarray, lengths: np.ndarray, batch: int = 3,
              reads: list[int] | None = None) -> ItlColumn:
    """A column as the reader holds it; `reads` gets a 1 each time the source is read."""
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    reads = [] if reads is None else reads

    def source(_rows: int) -> Iterator[np.ndarray]:
        reads.append(1)
        for first in range(0, lengths.size, batch):
            yield values[offsets[first] : offsets[min(first + batch, lengths.size)]].copy()

    return ItlColumn(shadow(values), offsets, source)


def test_the_shadow_keeps_zero_sign_finiteness_and_order() -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate([EDGES, rng.lognormal(2.0, 2.0, 5000), -rng.random(100)])
    got = shadow(values)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got == 0.0, values == 0.0)
    np.testing.assert_array_equal(got < 0.0, values < 0.0)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(values))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(values))
    finite = np.sort(values[np.isfinite(values)])
    assert (np.diff(shadow(finite).astype(float)) >= 0).all()  # never reverses two values
    normal = (np.abs(values) > 1e-30) & (np.abs(values) < 1e30)
    relative = np.abs(got[normal] - values[normal]) / np.abs(values[normal])
    assert relative.max() <= 2.0**-24  # float32's rounding: ~6e-8


@pytest.mark.parametrize("block", [1, 2, 5, 1000])
def test_exact_blocks_give_back_the_float64_gaps_whatever_the_batches(block: int) -> None:
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 6, 40)
    lengths[-4:] = 0  # trailing requests without gaps
    values = rng.lognormal(2.0, 1.0, int(lengths.sum()))
    column = _shadowed(values, lengths)
    starts = []
    for first, exact in column.exact_blocks(block):
        starts.append(first)
        end = min(first + block, lengths.size)
        np.testing.assert_array_equal(
            exact, values[column.offsets[first] : column.offsets[end]])
    assert starts == list(range(0, lengths.size, block))


def test_pooled_row_max_and_zeros_read_the_exact_gaps() -> None:
    lengths = np.array([3, 0, 2, 4])
    values = np.array([1.0 + 1e-12, 0.0, 1.0, 5.0, 0.0, 0.0, 0.0, 7.25, 7.25 + 1e-12])
    column = _shadowed(values, lengths)
    plain = ItlColumn(values, column.offsets)
    mask = np.array([True, True, False, True])
    np.testing.assert_array_equal(column.pooled(mask), plain.pooled(mask))
    np.testing.assert_array_equal(column.row_max(), [1.0 + 1e-12, np.nan, 5.0, 7.25 + 1e-12])
    np.testing.assert_array_equal(column.zero_counts(), [1, 0, 1, 2])


def test_released_shadows_are_read_again_unchanged_and_exact_columns_are_kept() -> None:
    values = np.array([2.5, 0.0, 1e-300, 9.0])
    reads: list[int] = []
    column = _shadowed(values, np.array([2, 2]), reads=reads)
    held = column.values.copy()
    column.release()
    assert reads == []  # nothing read until asked
    np.testing.assert_array_equal(column.values, held)
    assert reads == [1]
    plain = ItlColumn(values, column.offsets)
    plain.release()
    assert plain.values is values


def test_a_source_that_changed_since_the_first_read_is_refused() -> None:
    lengths = np.array([2, 2])
    column = _shadowed(np.array([1.0, 2.0, 3.0, 4.0]), lengths)
    shorter = ItlColumn(column.values, column.offsets,
                        lambda _rows: iter([np.array([1.0, 2.0, 3.0])]))
    with pytest.raises(ReportInputError, match="changed while the report read it"):
        list(shorter.exact_blocks(1))  # one line for the user, exit 2 (`zerohop report`)
    with pytest.raises(ValueError, match="exact source"):
        ItlColumn(column.values, column.offsets)


def test_columns_concatenated_keep_their_exact_values() -> None:
    a = _shadowed(np.array([1.0 + 1e-12, 2.0]), np.array([1, 1]))
    b = ItlColumn(np.array([3.0 + 1e-12]), np.array([0, 0, 1]))
    joined = ItlColumn.concat([a, b])
    np.testing.assert_array_equal(joined.offsets, [0, 1, 2, 2, 3])
    np.testing.assert_array_equal(joined.pooled(np.ones(4, dtype=bool)),
                                  [1.0 + 1e-12, 2.0, 3.0 + 1e-12])
    np.testing.assert_array_equal(joined.values, shadow(np.array([1.0, 2.0, 3.0])))
