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

from zerohop.analysis.latency.run_summary import summarise_run
from zerohop.analysis.quantiles import Distribution
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


def compare_samples(
    base_dirs: Sequence[Path], cand_dirs: Sequence[Path], settings: GateSettings
) -> tuple[list[GateRow], Any]:
    """Pooled bootstrap comparison, gated by the run-to-run noise band."""
    from zerohop.analysis.comparison.compare import CompareSettings, compare_runs
    from zerohop.storage.run_reader import load_run

    base_runs = [load_run(d) for d in base_dirs]
    cand_runs = [load_run(d) for d in cand_dirs]
    base_summaries = [summarise_run(r) for r in base_runs]
    cand_summaries = [summarise_run(r) for r in cand_runs]
    comparison = compare_runs(
        pool_runs(base_runs, "baseline"), pool_runs(cand_runs, "candidate"),
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
            base = sample_figures_of(base_summaries, metric.metric, row.stat)
            cand = sample_figures_of(cand_summaries, metric.metric, row.stat)
            band = max(spread(base), spread(cand))
            verdict = row.verdict
            if verdict in ("worse", "better") and within_noise(row.delta, base, cand, band):
                verdict = "within noise"
            rows.append(GateRow(metric.metric, row.stat, row.base, row.candidate, row.delta,
                                row.delta_pct, row.ci_low, row.ci_high, band, row.verdict,
                                verdict))
    return rows, comparison


def pool_runs(runs: Sequence[Any], label: str) -> Any:
    """Several samples as one RunData (requests concatenated, ITL offsets shifted).
    Samples have no one measured window between them, so the pooled manifest records
    no load duration: its rates fall back to the records' span."""
    import pandas as pd

    from zerohop.analysis.run_data import ItlColumn, RunData

    frames = [r.requests for r in runs]
    pooled = pd.concat(frames, ignore_index=True)
    for column in frames[0].columns:
        if isinstance(frames[0][column].dtype, pd.CategoricalDtype):
            pooled[column] = pooled[column].astype(object).astype("category")
    first = runs[0]
    manifest = {k: v for k, v in first.manifest.items() if k not in ("load", "config")}
    manifest["run_id"] = f"{label} ({len(runs)} samples)"
    return RunData(
        run_dir=first.run_dir, manifest=manifest, requests=pooled,
        itl=ItlColumn.concat([r.itl for r in runs]),
        telemetry=first.telemetry.iloc[0:0], microbench=None,
        requests_source=first.requests_source, notes=[],
    )


def gate_status(gates: Sequence[GateRow], microbench_regressed: bool) -> Status:
    verdicts = {g.verdict for g in gates}
    if "worse" in verdicts or microbench_regressed:
        return "regression"
    return "improved" if "better" in verdicts else "pass"


# --- figures kept in the history ----------------------------------------------------------
def sample_figures(dirs: Sequence[Path], metrics: Sequence[str]) -> dict[str, Any]:
    """Per metric: pooled p50/p90/p99 and each sample's p50 (for the trend charts)."""
    from zerohop.storage.run_reader import load_run

    runs = [load_run(d) for d in dirs]
    samples = [summarise_run(r).total for r in runs]
    pooled = summarise_run(pool_runs(runs, "samples")).total if runs else None
    out: dict[str, Any] = {}
    for metric in metrics:
        dist = pooled.latency[metric] if pooled is not None else None
        out[metric] = {
            "n": dist.n if dist is not None else 0,
            **{stat: _figure(dist, stat) for stat in ("p50", "p90", "p99")},
            "sample_p50": [_figure(s.latency[metric], "p50") for s in samples],
        }
    ok = sum(s.ok for s in samples)
    total = sum(s.requests for s in samples)
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
