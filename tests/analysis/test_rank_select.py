"""The histogram-then-bucket rank selection gives exactly what numpy's sort gives.

Every figure of the pooled ITL (p50…p99.9, min, max, the CDF) is read through
`rank_select.GroupedRanks`; here each is recomputed by the plain route, `np.sort`
of the pooled values and numpy's linear `np.quantile`, on data built to break a
bucketed search: ties, zeros (+0 and -0), negatives, NaN and infinities, values
below the floor bucket and beyond float32's range, one value, none, and groups that
share buckets.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import zerohop.analysis.rank_select as rank_select
from zerohop.analysis.itl_column import shadow
from zerohop.analysis.itl_pools import ItlPools
from zerohop.analysis.quantiles import CDF_GRID, PERCENTILES
from zerohop.analysis.rank_select import GroupedRanks
from zerohop.analysis.run_data import ItlColumn

pytestmark = pytest.mark.unit


def _column(values: np.ndarray, lengths: np.ndarray, shadowed: bool = False) -> ItlColumn:
    """The gaps as float64 in memory, or (`shadowed`) as requests.parquet's reader
    holds them: float32 shadows, the exact values read again in batches of 7 requests
    (so batches never line up with a pass's blocks)."""
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    exact = np.asarray(values, dtype=float)
    if not shadowed:
        return ItlColumn(values=exact, offsets=offsets)

    def source(_batch_rows: int) -> Iterator[np.ndarray]:
        for first in range(0, lengths.size, 7):
            last = min(first + 7, lengths.size)
            yield exact[offsets[first] : offsets[last]].copy()

    return ItlColumn(values=shadow(exact), offsets=offsets, exact_source=source)


def _hostile(seed: int, n_rows: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaps per request (0–20 each) and a group per request (0, 1, or 2 = nobody's)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 21, n_rows)
    n = int(lengths.sum())
    values = np.round(rng.lognormal(2.5, 0.8, n), 2)  # ties on purpose
    pick = rng.random(n)

    def share(low: float, high: float) -> np.ndarray:
        return (pick >= low) & (pick < high)

    values[share(0.0, 0.15)] = 0.0
    values[share(0.15, 0.17)] = -0.0
    values[share(0.17, 0.19)] = -rng.random(int(share(0.17, 0.19).sum()))
    values[share(0.19, 0.2)] = np.nan
    values[share(0.2, 0.205)] = np.inf
    values[share(0.205, 0.21)] = -np.inf
    values[share(0.21, 0.22)] = 1e-300 * rng.random(int(share(0.21, 0.22).sum()))  # floor
    values[share(0.22, 0.225)] = 1e300  # beyond float32: its top bucket
    # neighbours inside one float32 value: a bucket must not blur them
    values[share(0.225, 0.26)] = 14.0 + np.arange(int(share(0.225, 0.26).sum())) * 1e-12
    codes = rng.integers(0, 3, n_rows)
    return values, lengths, codes


def _linear(ordered: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """numpy's linear quantile, written out as the report has always computed it
    (`np.quantile` may round its last bit otherwise: it lerps from the nearer end)."""
    position = (ordered.size - 1) * fractions
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, ordered.size - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _plain(values: np.ndarray, lengths: np.ndarray, codes: np.ndarray,
           groups: list[int]) -> np.ndarray:
    per_value = np.repeat(np.isin(codes, groups), lengths)
    pooled = values[per_value]
    return np.sort(pooled[np.isfinite(pooled)])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("block_rows", [50, 300_000])  # blocks that split the requests, or one
@pytest.mark.parametrize("shadowed", [False, True], ids=["float64", "float32-shadows"])
def test_every_rank_is_the_sorted_pool(seed: int, block_rows: int, shadowed: bool,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_select, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr(rank_select, "PASS_ROWS", min(block_rows, 60_000) // 5)
    values, lengths, codes = _hostile(seed)
    ranks = GroupedRanks(_column(values, lengths, shadowed), codes, 3)
    for groups in ([0], [1], [0, 1], [0, 1, 2]):
        expected = _plain(values, lengths, codes, groups)
        assert ranks.finite(groups) == expected.size
        every = np.arange(expected.size)
        got = ranks.select([(groups, every)])[0]
        np.testing.assert_array_equal(got, expected)  # -0.0 == 0.0: the zeros' block
        assert ranks.sums[groups].sum() == pytest.approx(expected.sum(), rel=1e-12)
    if shadowed:  # the means' sums are the float64 column's, to the last bit
        in_memory = GroupedRanks(_column(values, lengths), codes, 3)
        np.testing.assert_array_equal(ranks.sums, in_memory.sums)


def test_several_queries_in_one_pass_do_not_mix() -> None:
    values, lengths, codes = _hostile(9)
    ranks = GroupedRanks(_column(values, lengths, shadowed=True), codes, 3)
    queries = [([0], np.array([0, 5, 17])), ([1], np.array([3, 3, 0])), ([0, 1], np.array([40]))]
    for (groups, wanted), got in zip(queries, ranks.select(queries), strict=True):
        np.testing.assert_array_equal(got, _plain(values, lengths, codes, groups)[wanted])


@pytest.mark.parametrize(
    "gaps",
    [[], [7.25], [np.nan], [0.0], [3.0, 3.0, 3.0], [0.0, 0.0, 5.0], [np.inf, 2.0, -1.0]],
    ids=["none", "one", "only-nan", "only-zero", "all-tied", "mostly-zero", "inf-neg"],
)
def test_pools_on_degenerate_runs_match_numpy(gaps: list[float]) -> None:
    values = np.array(gaps, dtype=float)
    requests = pd.DataFrame({"workload": pd.Categorical(["w"]), "outcome": pd.Categorical(["ok"])})
    pools = ItlPools(requests, _column(values, np.array([values.size])))
    finite = values[np.isfinite(values)]
    for between in (False, True):
        pooled = finite[finite != 0.0] if between else finite
        dist = pools.distribution(["w"], with_cdf=True, between_reads=between)
        assert dist.n == pooled.size
        if pooled.size == 0:
            assert np.isnan(dist.percentiles["p50"]) and dist.cdf is None
            continue
        named = _linear(np.sort(pooled), np.array([q / 100.0 for _, q in PERCENTILES]))
        assert list(dist.percentiles.values()) == named.tolist()
        assert dist.cdf is not None
        np.testing.assert_array_equal(dist.cdf[0], _linear(np.sort(pooled), CDF_GRID))
        assert (dist.min, dist.max) == (pooled.min(), pooled.max())
        assert dist.mean == pytest.approx(pooled.mean(), rel=1e-12)
    assert pools.non_finite(["w"]) == int((~np.isfinite(values)).sum())


def test_a_quarter_million_gaps_give_the_sorted_pools_quantiles() -> None:
    """At a size where every bucket of the body holds many values (the case the
    histogram exists for), the quantiles and the CDF are those of the sorted pool,
    bit for bit (and numpy's `np.quantile` to its last bit)."""
    rng = np.random.default_rng(4)
    lengths = rng.integers(0, 65, 8_000)
    values = rng.normal(14.0, 3.0, int(lengths.sum()))
    values[rng.random(values.size) < 0.1] = 0.0
    requests = pd.DataFrame({
        "workload": pd.Categorical(rng.choice(["chat", "summarise"], lengths.size)),
        "outcome": pd.Categorical(np.where(rng.random(lengths.size) < 0.98, "ok", "timeout")),
    })
    itl = _column(values, lengths, shadowed=True)
    pools = ItlPools(requests, itl)
    ok = (requests["outcome"] == "ok").to_numpy()
    for name in ("chat", "summarise", None):
        rows = ok if name is None else ok & (requests["workload"] == name).to_numpy()
        pooled = itl.pooled(rows)
        for between in (False, True):
            data = pooled[pooled != 0.0] if between else pooled
            dist = pools.distribution(None if name is None else [name], with_cdf=True,
                                      between_reads=between)
            fractions = np.concatenate([[q / 100.0 for _, q in PERCENTILES], CDF_GRID])
            expected = _linear(np.sort(data), fractions)
            np.testing.assert_allclose(expected, np.quantile(data, fractions), rtol=1e-15)
            assert dist.cdf is not None
            got = np.concatenate([list(dist.percentiles.values()), dist.cdf[0]])
            np.testing.assert_array_equal(got, expected)
    assert pools.quantile(None, 0.973) == _linear(np.sort(itl.pooled(ok)), np.array([0.973]))[0]


def test_many_groups_widen_the_buckets_and_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of many workloads would need a table of buckets per workload: past
    MAX_CELLS the buckets widen (here to 2^16 float32 values), and the answers stay
    the sorted pool's."""
    monkeypatch.setattr(rank_select, "MAX_CELLS", 3 * 20_000)
    values, lengths, codes = _hostile(12)
    ranks = GroupedRanks(_column(values, lengths), codes, 3)
    assert ranks._buckets.shift > rank_select.KEY_SHIFT
    for groups in ([0], [1, 2]):
        expected = _plain(values, lengths, codes, groups)
        got = ranks.select([(groups, np.arange(expected.size))])[0]
        np.testing.assert_array_equal(got, expected)
