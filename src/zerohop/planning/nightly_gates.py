"""The nightly's judgement: the candidate's samples pooled and compared with the
baseline's, each gated (metric, percentile) judged by the bootstrap and then by the
run-to-run noise band (`noise_band`), plus the microbenchmark medians; and the figures
each nightly keeps in its history. Every figure comes from `summarise_run`, the
report's own summary of a run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from zerohop.analysis.comparison.compared_values import ComparedValues
from zerohop.analysis.itl_column import ItlColumn
from zerohop.analysis.latency.run_summary import RunSummary, summarise_run
from zerohop.analysis.quantiles import Distribution
from zerohop.analysis.run_data import RunData
from zerohop.core.layout import MICROBENCH_FILE
from zerohop.core.metrics import needed_n, percentile_fraction
from zerohop.planning.noise_band import sample_figures_of, spread, within_noise

Status = Literal["baseline", "pass", "regression", "improved"]


class GateSettings(Protocol):
    """What the gates read of the profile's `compare` block (`nightly.CompareConfig`)."""

    @property
    def threshold(self) -> str: ...
    @property
    def n_boot(self) -> int: ...
    @property
    def confidence(self) -> float: ...
    @property
    def metrics(self) -> Sequence[str]: ...
    @property
    def stats(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class GateRow:
    """One gated (metric, percentile): the pooled bootstrap verdict and the noise band."""

    metric: str
    stat: str
    base: float
    candidate: float
    delta: float
    delta_pct: float
    ci_low: float
    ci_high: float
    noise_band: float
    bootstrap_verdict: str
    verdict: str  # worse / better / within noise / no data


@dataclass(frozen=True)
class Samples:
    """One side of a nightly: each sample read and summarised once, and what the
    comparison reads of them pooled (`ComparedValues`), after which their per-token
    gaps are let go (at ten million records: seconds and gigabytes a run)."""

    summaries: list[RunSummary]
    pooled: ComparedValues
    pooled_summary: RunSummary | None  # of every sample's records together, if asked

    @classmethod
    def load(cls, dirs: Sequence[Path], label: str, *, pooled_summary: bool = False,
             ) -> Samples:
        from zerohop.storage.run_reader import load_run

        runs = [load_run(d) for d in dirs]
        summaries = [summarise_run(r) for r in runs]
        pooled = pool_runs(runs, label)
        whole = summarise_run(pooled) if pooled_summary else None
        return cls(summaries, ComparedValues(pooled), whole)


def compare_samples(
    base: Samples, candidate: Samples, settings: GateSettings
) -> tuple[list[GateRow], Any]:
    """Pooled bootstrap comparison, gated by the run-to-run noise band."""
    from zerohop.analysis.comparison.compare import CompareSettings, compare_values

    comparison = compare_values(
        base.pooled, candidate.pooled,
        CompareSettings(threshold=settings.threshold, n_boot=settings.n_boot,
                        confidence=settings.confidence), layer=False)
    workload = comparison.workloads[-1]  # "all" (or the only workload)
    rows = []
    for metric in workload.metrics:
        if metric.metric not in settings.metrics:
            continue
        for row in metric.rows:
            if row.stat not in settings.stats:
                continue
            base_figures = sample_figures_of(base.summaries, metric.metric, row.stat)
            cand_figures = sample_figures_of(candidate.summaries, metric.metric, row.stat)
            band = max(spread(base_figures), spread(cand_figures))
            verdict = row.verdict
            if verdict in ("worse", "better") and within_noise(row.delta, base_figures,
                                                               cand_figures, band):
                verdict = "within noise"
            rows.append(GateRow(metric.metric, row.stat, row.base, row.candidate, row.delta,
                                row.delta_pct, row.ci_low, row.ci_high, band, row.verdict,
                                verdict))
    return rows, comparison


def pool_runs(runs: Sequence[RunData], label: str) -> RunData:
    """Several samples as one RunData (requests one after another, ITL offsets
    shifted; one sample's records as they are, not copied). Samples have no one
    measured window between them, so the pooled manifest records no load duration:
    its rates fall back to the records' span."""
    import pandas as pd

    frames = [r.requests for r in runs]
    pooled = (pd.concat(frames, ignore_index=True) if len(frames) > 1
              else frames[0].copy(deep=False))  # copy-on-write: the run's stays as it is
    for column in frames[0].columns:
        if isinstance(frames[0][column].dtype, pd.CategoricalDtype):
            pooled[column] = _joined_categories([f[column] for f in frames])
    first = runs[0]
    manifest = {k: v for k, v in first.manifest.items() if k not in ("load", "config")}
    manifest["run_id"] = f"{label} ({len(runs)} samples)"
    return RunData(
        run_dir=first.run_dir, manifest=manifest, requests=pooled,
        itl=ItlColumn.concat([r.itl for r in runs]) if len(runs) > 1 else first.itl,
        telemetry=first.telemetry.iloc[0:0], microbench=None,
        requests_source=first.requests_source, notes=[],
    )


def _joined_categories(columns: Sequence[Any]) -> Any:
    """One categorical column of the samples' columns one after another, with the
    categories they use, sorted (what a categorical of their values would hold),
    without turning millions of codes into strings and back."""
    import pandas as pd
    from pandas.api.types import union_categoricals

    try:
        joined = union_categoricals(list(columns), sort_categories=True)
    except TypeError:  # categories of different kinds (an all-null column's, say)
        return pd.concat([c.astype(object) for c in columns],
                         ignore_index=True).astype("category")
    return joined.remove_unused_categories()


def gate_status(gates: Sequence[GateRow], microbench_regressed: bool) -> Status:
    verdicts = {g.verdict for g in gates}
    if "worse" in verdicts or microbench_regressed:
        return "regression"
    return "improved" if "better" in verdicts else "pass"


# --- figures kept in the history ----------------------------------------------------------
def sample_figures(samples: Samples, metrics: Sequence[str]) -> dict[str, Any]:
    """Per metric: pooled p50/p90/p99 and each sample's p50 (for the trend charts)."""
    totals = [s.total for s in samples.summaries]
    pooled = samples.pooled_summary
    out: dict[str, Any] = {}
    for metric in metrics:
        dist = pooled.total.latency[metric] if pooled is not None else None
        out[metric] = {
            "n": dist.n if dist is not None else 0,
            **{stat: _figure(dist, stat) for stat in ("p50", "p90", "p99")},
            "sample_p50": [_figure(t.latency[metric], "p50") for t in totals],
        }
    ok = sum(t.ok for t in totals)
    total = sum(t.requests for t in totals)
    out["error_pct"] = 100.0 * (total - ok) / total if total else None
    return out


def _figure(dist: Distribution | None, stat: str) -> float | None:
    """A percentile for the history, None where its sample is smaller than it needs
    (`core.metrics.needed_n`, as the report, the console and the gates judge)."""
    if dist is None or dist.n < needed_n(percentile_fraction(stat)):
        return None
    return dist.get(stat)


def microbench_medians(dirs: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """`benchmark.metric` → {median, unit} from the samples' microbench.json (if any)."""
    out: dict[str, dict[str, Any]] = {}
    for d in dirs:
        path = d / MICROBENCH_FILE
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text("utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        for bench, body in (doc.get("benchmarks") or {}).items():
            for name, stat in ((body or {}).get("metrics") or {}).items():
                median = stat.get("median", stat.get("p50")) if isinstance(stat, dict) else None
                if isinstance(median, int | float) and math.isfinite(median):
                    out[f"{bench}.{name}"] = {"median": float(median), "unit": stat.get("unit")}
    return out


def compare_microbench(base: dict[str, Any], cand: dict[str, Any],
                       threshold: float) -> tuple[list[str], bool]:
    """Medians of thousands of GPU samples: a move beyond the threshold in the worse
    direction (higher for times, lower for rates) counts."""
    notes, regressed = [], False
    for key in sorted(set(base) & set(cand)):
        b, c = base[key]["median"], cand[key]["median"]
        if not b:
            continue
        change = (c - b) / abs(b)
        higher_is_better = key.endswith(("_gbps", "_per_s"))
        worse = change < -threshold if higher_is_better else change > threshold
        if worse:
            regressed = True
            notes.append(f"microbench {key}: {b:.4g} → {c:.4g} ({change:+.1%})")
    return notes, regressed
