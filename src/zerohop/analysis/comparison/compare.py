"""Compare runs: per-percentile deltas with bootstrap confidence intervals, a verdict
per metric, and — for the same workload direct and through an extra layer — the
latency the layer adds, per percentile.

A delta is "worse" (or "better") only when its confidence interval excludes zero AND
it is at least the preset's relative threshold: two runs of the same seeded workload
differ by a little more than sampling noise (the machine is never quite the same), so
a bare "CI excludes 0" would flag harmless drift. Presets follow asv/nvbench practice.

Runs driven through a client policy (retries, fallbacks) are also compared at the
level the user sees: logical requests (every attempt of one ask), their amplification,
success rate, latency including retries and waits, and the model that answered — the
figures of `analysis/latency/policy.py`, with the same intervals and verdicts.

The runs are independent samples; each side is bootstrapped on its own with the exact
order-statistic method of `bootstrap.py`. ITL values are pooled gaps, correlated
within a request, so their intervals are optimistic — the glossary says so.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import stats

from zerohop.analysis.bootstrap import percentile_interval
from zerohop.analysis.comparison.comparability import comparability_warnings
from zerohop.analysis.comparison.compared_values import ComparedValues, OrderedSample
from zerohop.analysis.latency.policy import PolicySummary, final_attempts, summarise_policy
from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.measured_window import measured_window
from zerohop.analysis.quantiles import PERCENTILES
from zerohop.analysis.run_data import RunData, category_codes
from zerohop.core import metrics as catalogue

Verdict = Literal["better", "worse", "within noise", "mixed", "no data"]
Cdf = tuple[np.ndarray, np.ndarray]  # (ms, cumulative fraction) for the chart

THRESHOLD_PRESETS: dict[str, float] = {"strict": 0.0, "default": 0.05, "lenient": 0.10}
COMPARED_METRICS: tuple[str, ...] = catalogue.REQUEST_LATENCIES
LAYER_METRICS: tuple[str, ...] = catalogue.LAYER_METRICS
ERROR_RATE_MIN_PP = 0.1  # percentage points: smaller error-rate changes are noise
LOGICAL_METRIC = "logical_e2e_ms"
ERROR_RATE = catalogue.METRICS["error_pct"]
OK_RATE = catalogue.METRICS["req_per_s"]
LOGICAL_STATS: tuple[str, ...] = ("p50", "p99")
LOGICAL_SCOPE = "(logical requests)"  # the bootstrap stream's tag: no workload has it


@dataclass(frozen=True)
class CompareSettings:
    threshold: str = "default"
    n_boot: int = 2000
    seed: int = 0
    confidence: float = 0.95

    @property
    def relative_threshold(self) -> float:
        return THRESHOLD_PRESETS[self.threshold]


@dataclass(frozen=True)
class PercentileDelta:
    metric: str
    stat: str
    base: float
    candidate: float
    delta: float
    delta_pct: float
    ci_low: float
    ci_high: float
    verdict: Verdict


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    verdict: Verdict
    rows: list[PercentileDelta]
    base_n: int
    candidate_n: int
    base_cdf: Cdf
    candidate_cdf: Cdf


@dataclass(frozen=True)
class RateComparison:
    name: str
    base: float
    candidate: float
    delta: float
    ci_low: float
    ci_high: float
    verdict: Verdict | None  # None: shown for context, not judged


@dataclass(frozen=True)
class WorkloadComparison:
    workload: str
    metrics: list[MetricComparison]
    rates: list[RateComparison]


@dataclass(frozen=True)
class LayerRow:
    metric: str
    stat: str
    direct_ms: float
    layered_ms: float
    layer_ms: float
    ci_low: float
    ci_high: float
    share_pct: float  # layer_ms as a share of the layered latency


@dataclass(frozen=True)
class LayerBudget:
    workload: str
    rows: list[LayerRow]


@dataclass(frozen=True)
class LogicalComparison:
    """Both runs at the level of logical requests (their whole-run `PolicySummary`s),
    with deltas: amplification and answered shares are shown, not judged (they are what
    the policy chose to do); logical success and latency are judged."""

    base: PolicySummary
    candidate: PolicySummary
    amplification: RateComparison
    success: RateComparison  # % of finished logical requests answered
    latency: list[PercentileDelta]  # logical E2E (retries and waits included), LOGICAL_STATS
    answered_share: list[RateComparison]  # % of the answered, per model that answered


@dataclass
class Comparison:
    baseline: str
    candidate: str
    settings: CompareSettings
    workloads: list[WorkloadComparison]
    layer_budgets: list[LayerBudget]
    notes: list[str] = field(default_factory=list)
    logical: LogicalComparison | None = None  # None: a run without logical-request records
    warnings: list[str] = field(default_factory=list)  # how the runs differ (duration, load…)

    @property
    def verdicts(self) -> dict[tuple[str, str], Verdict]:
        """(workload, metric) → verdict, e.g. ("all", "tpot_ms") → "worse"."""
        return {(w.workload, m.metric): m.verdict for w in self.workloads for m in w.metrics}


def compare_runs(
    base: RunData,
    candidate: RunData,
    settings: CompareSettings | None = None,
    *,
    layer: bool | None = None,
) -> Comparison:
    """Compare `candidate` against `base`, workload by workload (plus `all` when both
    runs have several). `layer=None` detects a layer comparison from the manifests'
    target kinds (base direct, candidate `layer`)."""
    return compare_values(ComparedValues(base), ComparedValues(candidate), settings,
                          layer=layer)


def compare_values(
    base_values: ComparedValues,
    cand_values: ComparedValues,
    settings: CompareSettings | None = None,
    *,
    layer: bool | None = None,
) -> Comparison:
    """`compare_runs` of runs whose compared values are read already (`zerohop
    compare` reads each run once, then lets its gap column go)."""
    base, candidate = base_values.run, cand_values.run
    settings = settings or CompareSettings()
    if settings.threshold not in THRESHOLD_PRESETS:
        choices = ", ".join(THRESHOLD_PRESETS)
        raise ValueError(f"threshold {settings.threshold!r} unknown; choose one of {choices}")
    notes = _workload_notes(base, candidate)
    if layer is None:
        layer = is_layer_pair(base, candidate)
    shared = _shared_workloads(base, candidate)
    if not shared:
        notes.append("the runs share no workload name: comparing all requests pooled")
    names = [*shared, ALL_WORKLOADS] if len(shared) != 1 else shared
    workloads = [_compare_workload((base_values, cand_values), name, settings)
                 for name in names]
    budgets = [_layer_budget(w) for w in workloads] if layer else []
    logical = compare_logical(base, candidate, settings)
    if logical is None and (_has_logical(base) or _has_logical(candidate)):
        notes.append("only one run has logical-request records: logical figures not compared")
    return Comparison(
        baseline=base.label,
        candidate=candidate.label,
        settings=settings,
        workloads=workloads,
        layer_budgets=budgets,
        notes=notes,
        logical=logical,
        warnings=comparability_warnings(base, candidate),
    )


def compare_logical(
    base: RunData, candidate: RunData, settings: CompareSettings
) -> LogicalComparison | None:
    """The client-policy level of a comparison, over each run's whole records (None
    unless both runs carry logical-request fields)."""
    b_summary, c_summary = summarise_policy(base.requests), summarise_policy(candidate.requests)
    if b_summary is None or c_summary is None:
        return None
    samples = (OrderedSample.of_sorted(np.sort(_logical_latencies(base))),
               OrderedSample.of_sorted(np.sort(_logical_latencies(candidate))))
    rows, _ = _percentile_deltas(samples, LOGICAL_SCOPE, LOGICAL_METRIC, settings,
                                 needs_n=False)  # as summarise_policy shows them
    b_amp, c_amp = b_summary.amplification, c_summary.amplification
    models = list(dict.fromkeys([*b_summary.answered_share, *c_summary.answered_share]))
    shares = []
    for model in models:
        b_share = 100.0 * b_summary.answered_share.get(model, 0.0)
        c_share = 100.0 * c_summary.answered_share.get(model, 0.0)
        shares.append(
            RateComparison(model, b_share, c_share, c_share - b_share, math.nan, math.nan, None)
        )
    return LogicalComparison(
        base=b_summary,
        candidate=c_summary,
        amplification=RateComparison(
            "amplification", b_amp, c_amp, c_amp - b_amp, math.nan, math.nan, None
        ),
        success=_proportion_comparison(
            "logical success %",
            (b_summary.answered, b_summary.finished),
            (c_summary.answered, c_summary.finished),
            settings,
            higher_is_better=True,
        ),
        latency=[r for r in rows if r.stat in LOGICAL_STATS],
        answered_share=shares,
    )


def is_layer_pair(base: RunData, candidate: RunData) -> bool:
    """True when the candidate ran through an extra layer and the baseline did not."""
    return _target_kind(candidate) == "layer" and _target_kind(base) in ("embedded", "external")


def judge(delta: float, base: float, ci: tuple[float, float], relative: float) -> Verdict:
    """better / worse / within noise for a latency delta (lower is better)."""
    if any(math.isnan(v) for v in (delta, base, *ci)):
        return "no data"
    big_enough = abs(delta) >= relative * abs(base)
    if ci[0] > 0 and delta > 0 and big_enough:
        return "worse"
    if ci[1] < 0 and delta < 0 and big_enough:
        return "better"
    return "within noise"


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    """A metric's verdict from its percentiles: one direction wins, both is mixed."""
    seen = set(verdicts)
    if "worse" in seen and "better" in seen:
        return "mixed"
    if "worse" in seen:
        return "worse"
    if "better" in seen:
        return "better"
    if seen and seen <= {"no data"}:
        return "no data"
    return "within noise"


# --- helpers ------------------------------------------------------------------------
def _compare_workload(
    values: tuple[ComparedValues, ComparedValues], workload: str, settings: CompareSettings,
) -> WorkloadComparison:
    base, candidate = values
    metrics = []
    for metric in COMPARED_METRICS:
        samples = (base.sample(workload, metric), candidate.sample(workload, metric))
        rows, (base_cdf, cand_cdf) = _percentile_deltas(samples, workload, metric, settings)
        metrics.append(
            MetricComparison(
                metric=metric,
                verdict=combine([r.verdict for r in rows]),
                rows=rows,
                base_n=samples[0].n,
                candidate_n=samples[1].n,
                base_cdf=base_cdf,
                candidate_cdf=cand_cdf,
            )
        )
    return WorkloadComparison(
        workload=workload, metrics=metrics,
        rates=_rates(base.run, candidate.run, workload, settings),
    )


def _percentile_deltas(
    samples: tuple[OrderedSample, OrderedSample],
    scope: str,
    metric: str,
    settings: CompareSettings,
    *,
    needs_n: bool = True,
) -> tuple[list[PercentileDelta], tuple[Cdf, Cdf]]:
    """Each percentile of both samples, its delta, the bootstrap interval of the delta
    (a seeded stream per scope, metric and side) and its verdict; and both CDFs.
    `needs_n`: a percentile the smaller sample cannot hold is not shown."""
    qs = [q / 100.0 for _, q in PERCENTILES]
    (base_points, base_cdf), (cand_points, cand_cdf) = (s.figures() for s in samples)
    base_draws, cand_draws = (s.draws(settings.n_boot, _rng(settings, scope, metric, side))
                              for side, s in enumerate(samples))
    smaller = min(s.n for s in samples)
    rows = []
    for i, (stat, _) in enumerate(PERCENTILES):
        b, c = base_points[i], cand_points[i]
        if needs_n and smaller < catalogue.needed_n(qs[i]):
            b = c = math.nan  # p99 of 15 values is their max
        delta = c - b
        ci = percentile_interval(cand_draws[i] - base_draws[i], settings.confidence)
        rows.append(
            PercentileDelta(
                metric=metric,
                stat=stat,
                base=b,
                candidate=c,
                delta=delta,
                delta_pct=100.0 * delta / b if b else math.nan,
                ci_low=ci[0],
                ci_high=ci[1],
                verdict=judge(delta, b, ci, settings.relative_threshold),
            )
        )
    return rows, (base_cdf, cand_cdf)


def _rates(
    base: RunData, candidate: RunData, workload: str, settings: CompareSettings
) -> list[RateComparison]:
    """Error rate (judged, normal-approximation CI on the difference of proportions)
    and ok throughput (shown, not judged: it depends on the load model)."""
    b_fail, b_n = _failures(base, workload)
    c_fail, c_n = _failures(candidate, workload)
    rates = []
    if b_n and c_n:
        rates.append(
            _proportion_comparison(
                ERROR_RATE.title, (b_fail, b_n), (c_fail, c_n), settings,
                higher_is_better=ERROR_RATE.better == "higher",
            )
        )
    b_rps, c_rps = _ok_rate(base, workload), _ok_rate(candidate, workload)
    rates.append(
        RateComparison(OK_RATE.title, b_rps, c_rps, c_rps - b_rps, math.nan, math.nan, None)
    )
    return rates


def _proportion_comparison(
    name: str,
    base: tuple[int, int],
    candidate: tuple[int, int],
    settings: CompareSettings,
    *,
    higher_is_better: bool,
) -> RateComparison:
    """Two proportions (hits, n) in percent, the delta in percentage points with a
    normal-approximation interval, judged when the interval excludes 0 and the change
    is at least ERROR_RATE_MIN_PP."""
    (b_hits, b_n), (c_hits, c_n) = base, candidate
    if not (b_n and c_n):
        nan = math.nan
        return RateComparison(name, nan, nan, nan, nan, nan, "no data")
    p1, p2 = b_hits / b_n, c_hits / c_n
    se = math.sqrt(p1 * (1 - p1) / b_n + p2 * (1 - p2) / c_n)
    z = float(_z(settings.confidence))
    diff = (p2 - p1) * 100.0
    low, high = diff - z * se * 100.0, diff + z * se * 100.0
    up: Verdict = "better" if higher_is_better else "worse"
    down: Verdict = "worse" if higher_is_better else "better"
    verdict: Verdict = "within noise"
    if se > 0 and low > 0 and diff >= ERROR_RATE_MIN_PP:
        verdict = up
    elif se > 0 and high < 0 and -diff >= ERROR_RATE_MIN_PP:
        verdict = down
    return RateComparison(name, p1 * 100, p2 * 100, diff, low, high, verdict)


def _layer_budget(comparison: WorkloadComparison) -> LayerBudget:
    """One workload direct (base) and through the layer (candidate): the latency the
    layer adds per percentile, and its share of the layered latency."""
    rows = []
    for metric in comparison.metrics:
        if metric.metric not in LAYER_METRICS:
            continue
        for r in metric.rows:
            share = 100.0 * r.delta / r.candidate if r.candidate else math.nan
            rows.append(
                LayerRow(
                    metric=r.metric,
                    stat=r.stat,
                    direct_ms=r.base,
                    layered_ms=r.candidate,
                    layer_ms=r.delta,
                    ci_low=r.ci_low,
                    ci_high=r.ci_high,
                    share_pct=share,
                )
            )
    return LayerBudget(workload=comparison.workload, rows=rows)


def _failures(run: RunData, workload: str) -> tuple[int, int]:
    frame = run.requests
    mask = np.ones(len(frame), dtype=bool)
    if workload != ALL_WORKLOADS:
        mask = (frame["workload"] == workload).to_numpy()
    failed = (frame["outcome"] != "ok").to_numpy() & mask
    return int(failed.sum()), int(mask.sum())


def _ok_rate(run: RunData, workload: str) -> float:
    frame = run.requests
    mask = np.ones(len(frame), dtype=bool)
    if workload != ALL_WORKLOADS:
        mask = (frame["workload"] == workload).to_numpy()
    window = measured_window(run)
    carried = (frame["outcome"] == "ok").to_numpy() & mask & window.counts(frame)
    return window.rate(int(carried.sum()))


def _logical_latencies(run: RunData) -> np.ndarray:
    """Logical E2E of every finished logical request (answered or not), as
    `summarise_policy` takes its percentiles."""
    finals = final_attempts(run.requests)
    if finals is None:
        return np.array([], dtype=float)
    values = finals[LOGICAL_METRIC].to_numpy(dtype=float)
    return values[np.isfinite(values)]


def _has_logical(run: RunData) -> bool:
    finals = final_attempts(run.requests)
    return finals is not None and not finals.empty


def _shared_workloads(base: RunData, candidate: RunData) -> list[str]:
    c = set(_workload_names(candidate))
    return [w for w in _workload_names(base) if w in c]


def _workload_names(run: RunData) -> list[str]:
    codes, names = category_codes(run.requests["workload"])
    present = np.bincount(codes[codes >= 0], minlength=len(names)) > 0
    return [name for name, seen in zip(names, present, strict=True) if seen]


def _workload_notes(base: RunData, candidate: RunData) -> list[str]:
    notes = []
    b_specs = {w.get("name"): w.get("spec") for w in base.manifest.get("workloads") or []}
    c_specs = {w.get("name"): w.get("spec") for w in candidate.manifest.get("workloads") or []}
    for name in sorted(set(b_specs) & set(c_specs), key=str):
        if b_specs[name] != c_specs[name]:
            notes.append(f"workload {name!r} has a different spec in the two runs")
    only = sorted(set(b_specs) ^ set(c_specs), key=str)
    if only:
        notes.append(f"workloads in only one run: {', '.join(map(str, only))}")
    return notes


def _target_kind(run: RunData) -> str | None:
    target = run.manifest.get("target") or {}
    kind = target.get("kind") if isinstance(target, dict) else None
    return str(kind) if kind else None


def _rng(settings: CompareSettings, workload: str, metric: str, side: int) -> np.random.Generator:
    """A stream per (workload, metric, side): results do not depend on loop order."""
    tag = zlib.crc32(f"{workload}\x00{metric}".encode())
    return np.random.default_rng([settings.seed, tag, side])


def _z(confidence: float) -> float:
    return float(stats.norm.ppf(0.5 + confidence / 2.0))
