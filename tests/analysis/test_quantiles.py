from __future__ import annotations

import numpy as np
import pytest

from zerohop.analysis.quantiles import CDF_GRID, PERCENTILES, describe, grouped_quantiles

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 50_001])
def test_describe_matches_numpy_and_ignores_nan(n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.lognormal(3.0, 1.0, n)
    with_nan = np.concatenate([values, [np.nan, np.inf]])
    dist = describe(with_nan, with_cdf=True)
    expected = np.percentile(values, [q for _, q in PERCENTILES])
    assert dist.n == n
    assert [dist.percentiles[name] for name, _ in PERCENTILES] == pytest.approx(expected, abs=1e-12)
    assert (dist.min, dist.max, dist.mean) == pytest.approx(
        (values.min(), values.max(), values.mean())
    )
    assert dist.cdf is not None
    assert dist.cdf[0] == pytest.approx(np.quantile(values, CDF_GRID))


def test_describe_of_nothing_is_all_nan() -> None:
    dist = describe(np.array([np.nan]))
    assert dist.n == 0
    assert np.isnan(dist.percentiles["p99"]) and np.isnan(dist.mean)


def test_describe_leaves_its_input_alone() -> None:
    values = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    describe(values, with_cdf=True)
    assert values.tolist() == [5.0, 1.0, 3.0, 2.0, 4.0]


def test_grouped_quantiles_match_per_group_numpy() -> None:
    rng = np.random.default_rng(1)
    codes = rng.integers(-1, 6, 5000)
    values = rng.exponential(10.0, 5000)
    values[::17] = np.nan
    qs = np.array([0.0, 0.5, 0.9, 0.99, 1.0])
    table, counts = grouped_quantiles(codes, values, 7, qs, min_count=3)
    for g in range(7):
        mine = values[(codes == g) & np.isfinite(values)]
        assert counts[g] == mine.size
        if mine.size >= 3:
            assert table[g] == pytest.approx(np.quantile(mine, qs))
        else:
            assert np.isnan(table[g]).all()  # group 6 never occurs


def test_grouped_quantiles_of_ascending_codes_need_no_reordering() -> None:
    rng = np.random.default_rng(2)
    codes = np.sort(rng.integers(0, 50, 20_000))  # a run's windows: already in order
    values = rng.lognormal(3.0, 1.0, codes.size)
    qs = np.array([0.5, 0.99])
    table, counts = grouped_quantiles(codes, values, 50, qs)
    for g in range(50):
        assert table[g] == pytest.approx(np.quantile(values[codes == g], qs), rel=1e-12)
    assert counts.sum() == codes.size
