"""`zerohop compare`'s shortcuts give numpy's own figures: the gaps between reads split
by workload in one pass (against a pooled copy filtered and sorted), percentiles and
CDF from one `np.quantile` (against `np.percentile` and `cdf_points`), the bootstrap
read from sorted values in place (against its partition)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from zerohop.analysis.bootstrap import quantile_draws
from zerohop.analysis.comparison.compared_values import GapsBetweenReads
from zerohop.analysis.itl_column import ItlColumn, shadow
from zerohop.analysis.quantiles import PERCENTILES, cdf_points, sorted_figures
from zerohop.analysis.run_data import RunData

pytestmark = pytest.mark.unit


def _run(seed: int) -> tuple[RunData, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, 500)
    values = np.round(rng.lognormal(2.0, 0.7, int(lengths.sum())), 3)  # ties
    values[rng.random(values.size) < 0.3] = 0.0
    values[:3] = [np.nan, np.inf, -1.0]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)

    def source(_rows: int) -> Iterator[np.ndarray]:  # the exact gaps in 11 uneven batches
        yield from np.array_split(values.copy(), 11)

    requests = pd.DataFrame({
        "workload": pd.Categorical(rng.choice(["chat", "rag"], lengths.size)),
        "outcome": pd.Categorical(np.where(rng.random(lengths.size) < 0.9, "ok", "timeout")),
    })
    run = RunData(run_dir=Path("run"), manifest={}, requests=requests,
                  itl=ItlColumn(shadow(values), offsets, source), telemetry=pd.DataFrame(),
                  microbench=None, requests_source="parquet")
    return run, lengths


@pytest.mark.parametrize("seed", [0, 1])
def test_each_workloads_gaps_are_the_pooled_copy_filtered_and_sorted(seed: int) -> None:
    run, lengths = _run(seed)
    exact = run.itl.pooled(np.ones(lengths.size, dtype=bool))
    gaps = GapsBetweenReads(run)
    ok = (run.requests["outcome"] == "ok").to_numpy()
    for name in ("chat", "rag", None, "absent"):
        rows = ok if name is None else ok & (run.requests["workload"] == name).to_numpy()
        pooled = exact[np.repeat(rows, lengths)]
        np.testing.assert_array_equal(gaps.of(name), np.sort(pooled[pooled > 0]))


@pytest.mark.parametrize("finite", [True, False])
def test_sorted_figures_are_numpys_percentiles_and_cdf(finite: bool) -> None:
    rng = np.random.default_rng(2)
    values = np.sort(np.round(rng.lognormal(2.0, 1.0, 10_001), 2))
    if not finite:
        values[-1] = np.inf
    percentiles, (points, grid) = sorted_figures(values)
    np.testing.assert_array_equal(percentiles,
                                  np.percentile(values, [q for _, q in PERCENTILES]))
    expected_points, expected_grid = cdf_points(values)
    np.testing.assert_array_equal(points, expected_points)
    np.testing.assert_array_equal(grid, expected_grid)
    empty, (none, _) = sorted_figures(np.empty(0))
    assert np.isnan(empty).all() and none.size == 0


def test_the_bootstrap_of_sorted_values_is_the_partitioned_ones() -> None:
    values = np.sort(np.random.default_rng(3).lognormal(2.0, 1.0, 50_000))
    qs = [0.5, 0.9, 0.99]
    in_place = quantile_draws(values, qs, 500, np.random.default_rng(7), presorted=True)
    partitioned = quantile_draws(values, qs, 500, np.random.default_rng(7))
    np.testing.assert_array_equal(in_place, partitioned)
