"""`zerohop compare` reads each figure by rank and gets numpy's own: every sample's
percentiles, CDF and bootstrap draws against a plain copy of the values (filtered,
sorted, then `np.percentile`, `np.quantile` and the partitioning bootstrap), the ITL
gaps fetched from float32 shadows, float64 in memory, or read back in uneven batches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from zerohop.analysis.bootstrap import quantile_draws
from zerohop.analysis.comparison.compared_values import QS, ComparedValues, OrderedSample
from zerohop.analysis.itl_column import ItlColumn, shadow
from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.quantiles import CDF_GRID, PERCENTILES, linear_positions, numpy_lerp
from zerohop.analysis.run_data import RunData

pytestmark = pytest.mark.unit


def _run(seed: int, exact_in_memory: bool) -> tuple[RunData, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, 3_000)
    values = np.round(rng.lognormal(2.0, 0.7, int(lengths.sum())), 3)  # ties
    values[rng.random(values.size) < 0.3] = 0.0
    values[:4] = [np.nan, np.inf, -1.0, -0.0]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)

    def source(_rows: int) -> Iterator[np.ndarray]:  # the exact gaps in 11 uneven batches
        yield from np.array_split(values.copy(), 11)

    n = lengths.size
    ttft = np.round(rng.lognormal(3.0, 0.5, n), 2)
    ttft[rng.random(n) < 0.05] = np.nan
    workload = rng.choice(["chat", "rag", None], n, p=[0.5, 0.45, 0.05])  # some unnamed
    requests = pd.DataFrame({
        "workload": pd.Categorical(workload),
        "outcome": pd.Categorical(np.where(rng.random(n) < 0.9, "ok", "timeout")),
        "ttft_ms": ttft,
    })
    itl = (ItlColumn(values.copy(), offsets) if exact_in_memory
           else ItlColumn(shadow(values), offsets, source))
    run = RunData(run_dir=Path("run"), manifest={}, requests=requests, itl=itl,
                  telemetry=pd.DataFrame(), microbench=None, requests_source="parquet")
    return run, lengths, values


def _plain(run: RunData, lengths: np.ndarray, gaps: np.ndarray, workload: str | None,
           metric: str) -> np.ndarray:
    """The sample as a pooled copy: the metric's finite values over the workload's ok
    requests (gaps: only those > 0 ms), sorted."""
    rows = (run.requests["outcome"] == "ok").to_numpy()
    if workload != ALL_WORKLOADS:
        rows = rows & (run.requests["workload"] == workload).to_numpy()
    if metric == "itl_ms":
        pooled = gaps[np.repeat(rows, lengths)]
        return np.sort(pooled[np.isfinite(pooled) & (pooled > 0)])
    values = run.requests[metric].to_numpy(dtype=float)[rows]
    return np.sort(values[np.isfinite(values)])


@pytest.mark.parametrize("exact_in_memory", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_each_sample_gives_numpys_figures_and_the_partitioned_bootstrap(
        seed: int, exact_in_memory: bool) -> None:
    run, lengths, gaps = _run(seed, exact_in_memory)
    compared = ComparedValues(run)
    assert compared.run.itl.values.size == 0  # the gap column is let go once read
    for workload in ("chat", "rag", ALL_WORKLOADS, "absent"):
        for metric in ("itl_ms", "ttft_ms"):
            sample = compared.sample(workload, metric)
            plain = _plain(run, lengths, gaps, workload, metric)
            assert sample.n == plain.size
            percentiles, (points, grid) = sample.figures()
            draws = sample.draws(300, np.random.default_rng(5))
            if plain.size == 0:
                assert np.isnan(percentiles).all() and points.size == 0
                assert np.isnan(draws).all()
                continue
            np.testing.assert_array_equal(
                percentiles, np.percentile(plain, [q for _, q in PERCENTILES]))
            np.testing.assert_array_equal(points, np.quantile(plain, CDF_GRID))
            np.testing.assert_array_equal(grid, CDF_GRID)
            shuffled = np.random.default_rng(9).permutation(plain)
            np.testing.assert_array_equal(
                draws, quantile_draws(shuffled, QS, 300, np.random.default_rng(5)))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1001, 65_537])
def test_numpys_linear_quantile_written_out_is_numpys_to_the_last_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    values = np.sort(rng.lognormal(1.0, 2.0, n) * rng.choice([1e-3, 1.0, 1e3], n))
    fractions = np.concatenate([QS, CDF_GRID, rng.random(500)])
    low, high, weight = linear_positions(n, fractions)
    np.testing.assert_array_equal(numpy_lerp(values[low], values[high], weight),
                                  np.quantile(values, fractions))


def test_a_sample_known_at_some_ranks_refuses_the_others() -> None:
    sample = OrderedSample.of_ranks(10, np.array([2, 5, 9]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(sample.at(np.array([9, 2])), [3.0, 1.0])
    for missing in (3, 10):
        with pytest.raises(KeyError):
            sample.at(np.array([missing]))
