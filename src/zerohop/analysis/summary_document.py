"""summary.json: a run's figures as one machine-readable document (docs/summary-json.md).

What vLLM's `--save-result`, GuideLLM's `benchmarks.json` and AIPerf's profile export
give their users, built from the same analysis as the console table and the report
(`run_summary.summarise_run`: the measured window, each workload's rates and
distributions, the SLO verdict; `fidelity.assess_fidelity`), so a script reading the
file and a person reading the page see one set of numbers. Nothing is computed here
that the analysis does not already compute; this module only lays it out.

Pure: takes a loaded `RunData` (and, when the caller has it, the run's `RunAnalysis`);
the writing is `storage.summary_file`. Non-finite numbers are left as NaN here and
written as null there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zerohop.analysis.client.fidelity import ClientFidelity, assess_fidelity
from zerohop.analysis.comparison.answers import answers_of_run, answers_summary
from zerohop.analysis.comparison.probe import ProbeFigures, summarise_probe
from zerohop.analysis.latency.error_samples import outcome_counts
from zerohop.analysis.latency.results_table import ResultsTable, run_results_table, table_document
from zerohop.analysis.latency.run_summary import silent_workloads, summarise_run
from zerohop.analysis.latency.slo import SloResult
from zerohop.analysis.latency.summary import ALL_WORKLOADS, WorkloadSummary
from zerohop.analysis.measured_window import MeasuredWindow
from zerohop.analysis.quantiles import PERCENTILE_NAMES, Distribution
from zerohop.analysis.run_analysis import RunAnalysis
from zerohop.analysis.run_data import RunData, category_codes
from zerohop.analysis.server.energy import EnergySummary, summarise_energy
from zerohop.analysis.server.saturation_replay import saturation_figures
from zerohop.analysis.timeseries import telemetry_lanes
from zerohop.core.metrics import RUN_RATES, SUMMARISED

SUMMARY_SCHEMA = "zerohop.summary"
SUMMARY_SCHEMA_VERSION = 1
DISTRIBUTION_FIELDS: tuple[str, ...] = ("n", "mean", "min", "max", *PERCENTILE_NAMES)
# the parts of the document whose keys are data (a metric's or an outcome's name), as
# docs/summary-json.md writes them: `workloads[].metrics.<metric>`
NAMED_KEYS: dict[str, str] = {"metrics": "<metric>", "outcomes": "<outcome>"}


@dataclass(frozen=True)
class SummaryParts:
    """What the document is laid out from: the analysis's own results."""

    summaries: Sequence[WorkloadSummary]
    slo_results: Sequence[SloResult]
    window: MeasuredWindow
    fidelity: ClientFidelity
    energy: EnergySummary | None = None
    results: ResultsTable | None = None  # the console's results block, when it printed one
    probe: ProbeFigures | None = None  # the interference probe's, when one ran
    saturation: dict[str, Any] | None = None  # analysis/server/saturation_replay.py's figures


def parts_of_analysis(analysis: RunAnalysis, run: RunData) -> SummaryParts:
    """The parts of a run already analysed (`zerohop run`: the console's analysis)."""
    window = analysis.window if analysis.window is not None else summarise_run(run).window
    return SummaryParts(analysis.summaries, analysis.slo_results, window, analysis.fidelity,
                        analysis.sections.get("energy"), probe=analysis.sections.get("probe"),
                        saturation=analysis.sections.get("saturation"))


def parts_of_run(run: RunData) -> SummaryParts:
    """The parts for a run nobody analysed yet (simulate, selfcheck): the run summary
    and the fidelity verdict, as `analyse_run` computes them, without the charts."""
    summary = summarise_run(run)
    lanes = telemetry_lanes(run.telemetry)
    fidelity = assess_fidelity(run.requests, lanes, run.manifest.get("client_fidelity"))
    return SummaryParts(summary.summaries, summary.slo_results, summary.window, fidelity,
                        summarise_energy(run, summary.window, lanes),
                        probe=summarise_probe(run),
                        saturation=saturation_figures(run))


def summary_document(run: RunData, parts: SummaryParts) -> dict[str, Any]:
    """The whole document (see docs/summary-json.md for every key)."""
    manifest = run.manifest
    rows = list(parts.summaries)
    total = rows[-1]
    per_workload = rows[:-1] if len(rows) > 1 else rows
    return {
        "schema": SUMMARY_SCHEMA,
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "zerohop_version": _text(_mapping(manifest.get("versions")).get("zerohop")),
        "run": _run_section(run),
        "window": _window_section(parts.window),
        "slo": _slo_section(parts.slo_results),
        "client_fidelity": _fidelity_section(parts.fidelity, manifest),
        "workloads": [_workload_section(run, s, parts.slo_results) for s in per_workload],
        "total": _workload_section(run, total, parts.slo_results, run_wide=True),
        "energy": _energy_section(parts.energy),
        "probe": _probe_section(parts.probe),
        "answers": answers_summary(answers_of_run(run.answers, manifest)),  # --answer-probe
        "saturation": parts.saturation,
        "results": table_document(results_of(run, parts)),
    }


def results_of(run: RunData, parts: SummaryParts) -> ResultsTable:
    """The results block (analysis/latency/results_table.py): the console's own when it
    printed one, else computed from the run at the percentiles it asked for."""
    if parts.results is not None:
        return parts.results
    return run_results_table(run, parts.summaries[-1], parts.slo_results)


def _probe_section(probe: ProbeFigures | None) -> dict[str, Any] | None:
    """The interference probe's shifts, idle against under load, per arm (null
    without a probe; a figure its phases had too few samples for is null, and
    `too_few` says why)."""
    if probe is None:
        return None
    return {"rate_rps": probe.rate_rps, "prompt_tokens": probe.prompt_tokens,
            "output_tokens": probe.output_tokens, "idle_s": probe.idle_s,
            "arms": [{"arm": arm.arm, "idle_n": arm.idle_n, "load_n": arm.load_n,
                      "failed": arm.failed,
                      "shifts": [{"metric": s.metric, "stat": s.stat, "idle_ms": s.idle_ms,
                                  "load_ms": s.load_ms, "delta_ms": s.delta_ms,
                                  "ci95_ms": [s.ci_low_ms, s.ci_high_ms],
                                  "too_few": s.too_few} for s in arm.shifts]}
                     for arm in probe.arms]}


def _energy_section(energy: EnergySummary | None) -> dict[str, Any] | None:
    """The GPUs' energy over the window (analysis/server/energy.py); `modelled` where it came
    from a GPU model (the embedded target, the virtual clock), not a measured GPU."""
    if energy is None:
        return None
    return {"modelled": energy.modelled, "method": energy.method, "gpus": len(energy.gpus),
            "coverage": energy.coverage, "energy_j": energy.energy_j,
            "mean_power_w": energy.mean_power_w,
            "j_per_token_generated": energy.j_per_output_token,  # "…_token" reads as a secret
            "j_per_ok_request": energy.j_per_ok_request,
            "j_per_item": energy.j_per_item,
            "output_tokens_per_j": energy.output_tokens_per_j}


def _run_section(run: RunData) -> dict[str, Any]:
    manifest = run.manifest
    target = _mapping(manifest.get("target"))
    load = _mapping(manifest.get("load"))
    codes, names = category_codes(run.requests["model"])
    used = np.unique(codes[codes >= 0])
    return {
        "run_id": _text(manifest.get("run_id")) or run.run_dir.name,
        "name": _text(manifest.get("name")),
        "status": _text(manifest.get("status")),
        "end_reason": _text(manifest.get("end_reason")),
        "started_at": _text(manifest.get("started_at")),
        "ended_at": _text(manifest.get("ended_at")),
        "target": {"url": _text(target.get("url")), "kind": _text(target.get("kind"))},
        "api": _text(target.get("api")),
        "models": [names[i] for i in used],
        "load": {
            "mode": _text(load.get("mode")),
            "users": _number(load.get("users")),
            "rate_rps": _number(load.get("rate_rps")),
            "duration_s": _number(load.get("duration_s")),
            "requests": _number(load.get("requests")),
            "max_concurrency": _number(load.get("max_concurrency")),
            "not_sent": len(run.not_sent),
        },
        "simulated": "simulation" in manifest,
        "sent_nothing": silent_workloads(manifest, set(run.requests["workload"].unique())),
    }


def _window_section(window: MeasuredWindow) -> dict[str, Any]:
    return {
        "start_ts": window.start_ts,
        "end_ts": window.end_ts,
        "duration_s": window.duration_s,
        "source": window.source,
        "record_weight": window.weight,
    }


def _slo_section(results: Sequence[SloResult]) -> dict[str, Any]:
    """The run's objectives (its --slo, which gate the exit code) and each workload's
    own; `gate`: met / missed / no data / none, over the run's objectives only."""
    gate = [r for r in results if r.workload is None]
    if not gate:
        verdict = "none"
    elif any(r.met is False for r in gate):
        verdict = "missed"
    elif any(r.met is None for r in gate):
        verdict = "no data"
    else:
        verdict = "met"
    return {"gate": verdict, "objectives": [_objective(r) for r in results]}


def _objective(result: SloResult) -> dict[str, Any]:
    target = result.target
    return {
        "key": target.key,
        "workload": result.workload,
        "metric": target.column,
        "statistic": target.statistic,
        "threshold_ms": target.threshold_ms,
        "observed_ms": result.observed_ms,
        "met": result.met,
    }


def _fidelity_section(fidelity: ClientFidelity, manifest: Mapping[str, Any]) -> dict[str, Any]:
    counters = _mapping(manifest.get("counters"))
    return {
        "ok": fidelity.ok,
        "reasons": list(fidelity.reasons),
        "schedule_lag_ms": _distribution(fidelity.schedule_lag),
        "loadgen_cpu_max_pct": fidelity.cpu_max_pct,
        "loop_lag_p99_ms": fidelity.loop_lag_p99_ms,
        "dropped_arrivals": _number(counters.get("dropped_arrivals")),
    }


def _workload_section(run: RunData, summary: WorkloadSummary, results: Sequence[SloResult],
                      *, run_wide: bool = False) -> dict[str, Any]:
    requests = run.requests
    if summary.workload == ALL_WORKLOADS or run_wide:
        mask = np.ones(len(requests), dtype=bool)
    else:
        mask = (requests["workload"] == summary.workload).to_numpy()
    figures = {**summary.latency, **summary.figures}
    # a workload's own objectives judge it; the run's (--slo) judge the whole run
    judging = [r for r in results if r.workload == (None if run_wide else summary.workload)]
    return {
        "workload": ALL_WORKLOADS if run_wide else summary.workload,
        "requests": summary.requests,
        "ok": summary.ok,
        "errors": summary.errors,
        "error_pct": summary.error_pct,
        "outcomes": {o.outcome: o.count for o in outcome_counts(requests.loc[mask, ["outcome"]])},
        # items/s: pooling requests' texts (null where none carried any)
        "rates": {name: getattr(summary, name) for name in RUN_RATES}
        | {"items_per_s": summary.items_per_s, "offered_rps": summary.offered_rps},
        "good": summary.good,
        "good_fraction": summary.good_fraction,
        "metrics": {name: _distribution(figures[name]) for name in SUMMARISED
                    if name in figures},
        "slo_met": _all_met(judging),
    }


def _all_met(results: Sequence[SloResult]) -> bool | None:
    """True when every objective judging these requests was met, False when one was
    missed, None when there is none or one had no data."""
    if any(r.met is False for r in results):
        return False
    if not results or any(r.met is None for r in results):
        return None
    return True


def _distribution(dist: Distribution | None) -> dict[str, Any] | None:
    if dist is None:
        return None
    return {"n": dist.n, **{name: dist.get(name) for name in DISTRIBUTION_FIELDS[1:]}}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None
