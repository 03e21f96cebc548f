"""Summary statistics and unit conversions."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerohop.microbench.stats import gbps, percentile, summarize

pytestmark = pytest.mark.unit


def test_summary_of_known_samples() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0], unit="us", description="d")
    assert (s.median, s.p50) == (3.0, 3.0)
    assert s.p99 == pytest.approx(4.0 + 0.96 * 96.0)  # linear between the top two
    assert (s.min, s.max, s.n) == (1.0, 100.0, 5)
    assert s.mean == pytest.approx(22.0)
    assert s.stdev == pytest.approx(statistics.stdev([1, 2, 3, 4, 100]))
    assert (s.unit, s.description) == ("us", "d")


def test_single_sample_has_no_spread() -> None:
    s = summarize([7.5], unit="GB/s")
    assert (s.median, s.p99, s.min, s.max, s.mean, s.stdev, s.n) == (7.5, 7.5, 7.5, 7.5,
                                                                       7.5, 0.0, 1)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_rejects_empty_and_non_finite(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(bad, unit="us")


@given(st.lists(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), min_size=1,
                max_size=200))
def test_summary_is_always_a_valid_stat(values: list[float]) -> None:
    s = summarize(values, unit="us")  # the Stat validator checks the ordering
    assert s.min == min(values) and s.max == max(values)
    assert s.p50 == pytest.approx(statistics.median(values), abs=1e-6)


def test_percentile_bounds() -> None:
    assert percentile([1, 2, 3], 0) == 1
    assert percentile([1, 2, 3], 100) == 3
    assert percentile([10, 20], 50) == 15
    with pytest.raises(ValueError):
        percentile([1], 101)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_gbps_uses_decimal_gigabytes() -> None:
    assert gbps(256 * 2**20, 0.005) == pytest.approx(268435456 / 0.005 / 1e9)
    assert gbps(1e9, 1.0) == 1.0
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError):
            gbps(1, bad)
