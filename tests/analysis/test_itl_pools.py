"""The sorted ITL pools give exactly what pooling and describing the gaps gave."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import zerohop.analysis.itl_pools as itl_pools
from zerohop.analysis.itl_pools import ItlPools, longest_zero_runs
from zerohop.analysis.latency.reads import summarise_reads
from zerohop.analysis.quantiles import (
    PERCENTILE_NAMES,
    Distribution,
    describe,
    describe_sorted,
    select_ranks,
)
from zerohop.analysis.run_data import ItlColumn

pytestmark = pytest.mark.unit


def _run(seed: int, n: int = 400) -> tuple[pd.DataFrame, ItlColumn]:
    """Three workloads, failed requests, empty streams, 0 ms gaps, a NaN and an inf."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, n)
    values = np.round(rng.lognormal(2.0, 0.6, int(lengths.sum())), 1)  # ties on purpose
    values[rng.random(values.size) < 0.2] = 0.0
    values[[3, 50]] = [np.nan, np.inf]
    requests = pd.DataFrame(
        {
            "workload": pd.Categorical(rng.choice(["chat", "rag", "code"], n)),
            "outcome": pd.Categorical(np.where(rng.random(n) < 0.9, "ok", "http_503")),
        }
    )
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return requests, ItlColumn(values=values, offsets=offsets)


def _same(a: Distribution, b: Distribution) -> None:
    assert a.n == b.n
    assert a.percentiles == b.percentiles
    assert (a.min, a.max) == (b.min, b.max)
    assert a.mean == pytest.approx(b.mean, rel=1e-12)
    assert (a.cdf is None) == (b.cdf is None)
    if a.cdf is not None and b.cdf is not None:
        np.testing.assert_array_equal(a.cdf[0], b.cdf[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pools_describe_exactly_what_the_pooled_gaps_describe(seed: int) -> None:
    requests, itl = _run(seed)
    pools = ItlPools(requests, itl)
    ok = (requests["outcome"] == "ok").to_numpy()
    workload = requests["workload"].astype(str).to_numpy()
    for name in ("chat", "rag", "code"):
        gaps = itl.pooled(ok & (workload == name))
        _same(pools.distribution([name], with_cdf=True), describe(gaps, with_cdf=True))
        between = gaps[gaps != 0.0]
        _same(
            pools.distribution([name], with_cdf=True, between_reads=True),
            describe(between, with_cdf=True),
        )
        assert pools.non_finite([name]) == int((~np.isfinite(gaps)).sum())
    everything = itl.pooled(ok)
    _same(pools.distribution(None, with_cdf=True), describe(everything, with_cdf=True))
    _same(pools.distribution(["chat", "code"]), describe(itl.pooled(ok & (workload != "rag"))))
    finite = everything[np.isfinite(everything)]
    for q in (0.0, 0.5, 0.99, 0.999, 1.0):
        assert pools.quantile(None, q) == pytest.approx(np.quantile(finite, q), rel=1e-12)


def test_a_workload_without_gaps_is_nan_not_an_error() -> None:
    requests, itl = _run(3)
    pools = ItlPools(requests, itl)
    dist = pools.distribution(["nobody"], with_cdf=True)
    assert dist.n == 0 and all(np.isnan(dist.percentiles[p]) for p in PERCENTILE_NAMES)
    assert np.isnan(pools.quantile(["nobody"], 0.99))


def test_select_ranks_merges_sorted_segments_with_ties() -> None:
    rng = np.random.default_rng(5)
    segments = [np.sort(rng.integers(0, 20, size).astype(float)) for size in (1, 7, 30, 200)]
    merged = np.sort(np.concatenate(segments))
    ranks = np.arange(merged.size)
    np.testing.assert_array_equal(select_ranks(segments, ranks), merged)
    dist = describe_sorted([*segments, np.array([])], with_cdf=True)
    _same(dist, describe(merged, with_cdf=True))


def _naive_zero_runs(itl: ItlColumn) -> list[int]:
    out = []
    for i in range(itl.offsets.size - 1):
        best = run = 0
        for gap in itl.values[itl.offsets[i] : itl.offsets[i + 1]]:
            run = run + 1 if gap == 0.0 else 0
            best = max(best, run)
        out.append(best)
    return out


def test_longest_zero_runs_stop_at_each_request_and_span_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests, itl = _run(7)
    expected = _naive_zero_runs(itl)
    assert longest_zero_runs(itl).tolist() == expected
    monkeypatch.setattr(itl_pools, "BLOCK_ROWS", 3)  # blocks end mid-run of requests
    assert longest_zero_runs(itl).tolist() == expected
    pools = ItlPools(requests, itl)
    _same(pools.distribution(None), describe(itl.pooled((requests["outcome"] == "ok").to_numpy())))


def _naive_delivery(itl: ItlColumn, rows: np.ndarray) -> tuple[int, int, int, int, int]:
    """What the read-delivery section counted before the pools: one pooled copy."""
    gaps, same = itl.pooled(rows), itl.pooled(rows) == 0.0
    lengths = itl.lengths[rows]
    max_per_read = 0
    for i in np.flatnonzero(rows):
        run = best = 0
        for gap in itl.values[itl.offsets[i] : itl.offsets[i + 1]]:
            run = run + 1 if gap == 0.0 else 0
            best = max(best, run)
        max_per_read = max(max_per_read, best + 1)
    n = int(rows.sum())
    return gaps.size, int(same.sum()), n + int((~same).sum()), int(lengths.sum()) + n, max_per_read


def test_read_delivery_counts_match_the_pooled_gaps() -> None:
    requests, itl = _run(11)
    ok = (requests["outcome"] == "ok").to_numpy() & (itl.lengths > 0)
    workload = requests["workload"].astype(str).to_numpy()
    rows = summarise_reads(requests, itl, ["chat", "rag", "code", "all"])
    for row in rows:
        mask = ok if row.workload == "all" else ok & (workload == row.workload)
        counts = (row.gaps, row.same_read_gaps, row.reads, row.events, row.max_events_per_read)
        assert counts == _naive_delivery(itl, mask)
        gaps = itl.pooled(mask)
        _same(row.between_reads, describe(gaps[gaps != 0.0], with_cdf=True))
