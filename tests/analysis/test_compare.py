"""Comparison: the bootstrap is the real bootstrap, same-workload runs are within
noise, a 20 %-slower target is worse for TPOT, and a layer's cost is attributed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tests.run_fixtures import RunFactory
from zerohop.analysis.bootstrap import quantile_draws
from zerohop.analysis.comparison.compare import CompareSettings, compare_runs, judge
from zerohop.analysis.itl_column import ItlColumn
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_order_statistic_draws_match_brute_force_resampling(q: float) -> None:
    rng = np.random.default_rng(0)
    values = np.round(rng.lognormal(3.0, 0.8, 300), 1)  # rounding adds ties
    fast = quantile_draws(values, [q], 20000, np.random.default_rng(1))[0]
    resamples = rng.choice(values, size=(20000, values.size), replace=True)
    brute = np.quantile(resamples, q, axis=1, method="inverted_cdf")
    assert stats.ks_2samp(fast, brute).pvalue > 0.001
    assert np.mean(fast) == pytest.approx(np.mean(brute), rel=0.01)


def test_draws_for_a_million_values_are_fast_and_centred() -> None:
    values = np.random.default_rng(2).exponential(10.0, 1_000_000)
    draws = quantile_draws(values, [0.5, 0.999], 2000, np.random.default_rng(3))
    assert np.median(draws[0]) == pytest.approx(np.quantile(values, 0.5), rel=1e-3)
    assert np.median(draws[1]) == pytest.approx(np.quantile(values, 0.999), rel=1e-2)
    assert draws[1].std() > 0


def test_judge_needs_both_a_ci_excluding_zero_and_a_big_enough_delta() -> None:
    assert judge(10.0, 100.0, (5.0, 15.0), 0.05) == "worse"
    assert judge(-10.0, 100.0, (-15.0, -5.0), 0.05) == "better"
    assert judge(10.0, 100.0, (-1.0, 15.0), 0.05) == "within noise"  # CI includes 0
    assert judge(2.0, 100.0, (1.0, 3.0), 0.05) == "within noise"  # real but < 5 %
    assert judge(2.0, 100.0, (1.0, 3.0), 0.0) == "worse"  # strict preset
    assert judge(float("nan"), 100.0, (1.0, 3.0), 0.05) == "no data"


def test_same_seeded_workload_twice_is_within_noise(make_run: RunFactory) -> None:
    base = load_run(make_run(noise_seed=1, name="base"))
    again = load_run(make_run(noise_seed=2, name="again"))
    comparison = compare_runs(base, again)
    verdicts = comparison.verdicts
    assert set(verdicts.values()) == {"within noise"}, verdicts
    assert {w for w, _ in verdicts} == {"chat", "summarise", "all"}
    assert comparison.layer_budgets == []


def test_a_target_twenty_percent_slower_per_token_is_worse_for_tpot(make_run: RunFactory) -> None:
    base = load_run(make_run(noise_seed=1, name="base"))
    slower = load_run(make_run(noise_seed=2, tpot_scale=1.2, name="slower"))
    comparison = compare_runs(base, slower, CompareSettings(seed=7))
    verdicts = comparison.verdicts
    assert verdicts[("all", "tpot_ms")] == "worse"
    assert verdicts[("all", "itl_ms")] == "worse"
    assert verdicts[("all", "ttft_ms")] == "within noise"
    tpot = next(m for m in comparison.workloads[-1].metrics if m.metric == "tpot_ms")
    p50 = next(r for r in tpot.rows if r.stat == "p50")
    assert p50.ci_low > 0  # the interval excludes zero
    assert p50.delta_pct == pytest.approx(20.0, abs=3.0)
    assert p50.ci_low < p50.delta < p50.ci_high


def test_comparison_is_reproducible_with_the_same_seed(make_run: RunFactory) -> None:
    base = load_run(make_run(noise_seed=1, name="base"))
    slower = load_run(make_run(noise_seed=2, tpot_scale=1.2, name="slower"))
    first = compare_runs(base, slower, CompareSettings(seed=3))
    second = compare_runs(base, slower, CompareSettings(seed=3))
    rows = lambda c: [(r.ci_low, r.ci_high) for w in c.workloads for m in w.metrics for r in m.rows]  # noqa: E731
    assert rows(first) == rows(second)


def test_layer_budget_attributes_the_added_latency_per_percentile(make_run: RunFactory) -> None:
    direct = load_run(make_run(noise_seed=1, target_kind="embedded", name="direct"))
    layered = load_run(
        make_run(noise_seed=2, target_kind="layer", extra_layer_ms=40.0, name="layered")
    )
    comparison = compare_runs(direct, layered)  # detected from the manifests' target kinds
    budget = comparison.layer_budgets[-1]
    assert budget.workload == "all"
    ttft_p50 = next(r for r in budget.rows if r.metric == "ttft_ms" and r.stat == "p50")
    assert ttft_p50.layer_ms == pytest.approx(40.0, abs=12.0)
    assert ttft_p50.ci_low > 0
    assert 0 < ttft_p50.share_pct < 100
    assert {r.metric for r in budget.rows} == {"ttft_ms", "e2e_ms"}
    assert compare_runs(direct, layered, layer=False).layer_budgets == []


def test_error_rate_is_judged(make_run: RunFactory) -> None:
    base = load_run(make_run(noise_seed=1, name="base"))
    failing = load_run(make_run(noise_seed=2, error_rate=0.08, name="failing"))
    comparison = compare_runs(base, failing)
    error_rate = comparison.workloads[-1].rates[0]
    assert error_rate.name == "error %"
    assert error_rate.verdict == "worse"
    assert error_rate.ci_low > 0


def test_a_percentile_is_judged_only_where_both_samples_hold_it(make_run: RunFactory) -> None:
    """The report's n rule (p99 needs 100 values, p99.9 1,000): compare calls p99 of 15
    requests "no data" instead of better or worse (it is their maximum)."""
    from zerohop.core.metrics import needed_n

    base = load_run(make_run(noise_seed=1, n_requests=60, name="base"))
    slower = load_run(make_run(noise_seed=2, n_requests=60, tpot_scale=1.5, name="slower"))
    comparison = compare_runs(base, slower, CompareSettings(seed=7))
    for workload in comparison.workloads:
        for metric in workload.metrics:
            smaller = min(metric.base_n, metric.candidate_n)
            for row in metric.rows:
                q = float(row.stat.removeprefix("p")) / 100
                if smaller < needed_n(q):
                    assert row.verdict == "no data", (workload.workload, metric.metric, row)
                else:
                    assert row.verdict != "no data", (workload.workload, metric.metric, row)


def test_itl_is_compared_between_reads_as_the_report_shows_it(make_run: RunFactory) -> None:
    """A run whose tokens arrive several to a read (speculative decoding) has 0 ms gaps
    inside each read; every-gap ITL made it look 99 % faster. Compared between reads, the
    same per-read pace is within noise."""
    base = load_run(make_run(noise_seed=1, name="base"))
    spec = load_run(make_run(noise_seed=2, name="spec"))
    ok = (spec.requests["outcome"] == "ok").to_numpy()
    # three of every four gaps become same-read 0 ms gaps; the fourth keeps its value
    values = spec.itl.pooled(np.ones(ok.size, dtype=bool))  # exact float64, a copy
    values[np.arange(values.size) % 4 != 3] = 0.0
    spec.itl = ItlColumn(values, spec.itl.offsets)
    assert (spec.itl.pooled(ok) == 0).mean() > 0.7
    comparison = compare_runs(base, spec, CompareSettings(seed=7))
    itl = next(m for m in comparison.workloads[-1].metrics if m.metric == "itl_ms")
    assert itl.candidate_n == int((spec.itl.pooled(ok) > 0).sum())
    p50 = next(r for r in itl.rows if r.stat == "p50")
    assert abs(p50.delta_pct) < 5 and p50.verdict == "within noise", p50
