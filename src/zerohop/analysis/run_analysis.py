"""One run → every figure the report shows (accumulate → compile; rendering is
elsewhere). Pure: takes a loaded `RunData`, returns a `RunAnalysis`, touches no file.

The figures of the report's registry sections (`report/sections.py`) are computed by
the analyses registered here under each section's name, once per run, into
`RunAnalysis.sections`; the built-in ones are registered below, so a run analysed
without the report (the console summary) has them too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from zerohop.analysis.client.fidelity import ClientFidelity, assess_fidelity
from zerohop.analysis.comparison.probe import summarise_probe
from zerohop.analysis.itl_pools import ItlPools, longest_zero_runs
from zerohop.analysis.latency.error_samples import (
    ErrorSample,
    OutcomeCount,
    error_samples,
    outcome_counts,
)
from zerohop.analysis.latency.load_shape import WorkloadLoad, workload_loads
from zerohop.analysis.latency.lora_adapters import summarise_adapters
from zerohop.analysis.latency.policy import summarise_policy
from zerohop.analysis.latency.prefill import PrefillFit, fit_prefill
from zerohop.analysis.latency.reads import ReadDelivery, summarise_reads
from zerohop.analysis.latency.run_summary import summarise_run
from zerohop.analysis.latency.sessions import SessionAnalysis, summarise_sessions
from zerohop.analysis.latency.slo import SloResult
from zerohop.analysis.latency.spec_decode import summarise_spec_decode
from zerohop.analysis.latency.structured_output import StructuredShare, structured_shares
from zerohop.analysis.latency.summary import ALL_WORKLOADS, WorkloadSummary
from zerohop.analysis.latency.token_counts import TokenCounts, summarise_token_counts
from zerohop.analysis.measured_window import MeasuredWindow
from zerohop.analysis.run_data import RunData
from zerohop.analysis.server.alerts import (
    DEFAULT_ALERT_RULES,
    AlertResult,
    AlertRule,
    evaluate_rules,
    load_rules,
)
from zerohop.analysis.server.correlation import CorrelationReport, CorrelationSettings, find_drivers
from zerohop.analysis.server.driver_lanes import driver_lanes
from zerohop.analysis.server.energy import summarise_energy
from zerohop.analysis.server.microbench import summarise_microbench
from zerohop.analysis.server.pd_split import pd_split
from zerohop.analysis.server.saturation_replay import saturation_figures
from zerohop.analysis.server.time_budget import time_budget
from zerohop.analysis.timeseries import (
    Lane,
    TelemetryGap,
    Timeline,
    lane_windows,
    latency_series,
    load_series,
    outcome_series,
    run_timeline,
    schedule_lag_series,
    telemetry_gaps,
    telemetry_lanes,
)
from zerohop.core.metrics import REQUEST_LATENCIES

MAX_CHART_POINTS = 2000
CDF_METRICS: tuple[str, ...] = REQUEST_LATENCIES


@dataclass(frozen=True)
class AnalysisSettings:
    window_s: float = 2.0
    max_lag_windows: int = 5
    fdr: float = 0.01
    min_abs_rho: float = 0.3
    alert_rules: tuple[AlertRule, ...] | None = None  # None: DEFAULT_ALERT_RULES


@dataclass
class TimeSeriesData:
    """Chart-resolution series on one time axis (seconds since `timeline.t0`)."""

    timeline: Timeline
    load: pd.DataFrame
    latency: pd.DataFrame
    schedule_lag: pd.DataFrame
    outcomes: pd.DataFrame
    lanes: pd.DataFrame  # lane key → window mean
    lane_metrics: dict[str, str]  # lane key → metric
    lane_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # key → labels
    lane_sources: dict[str, str] = field(default_factory=dict)  # key → source (nvml, prom:…)


@dataclass
class RunAnalysis:
    label: str
    manifest: dict[str, Any]
    settings: AnalysisSettings
    timeline: Timeline
    summaries: list[WorkloadSummary]
    slo_results: list[SloResult]
    cdfs: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]  # metric → workload → (x, q)
    charts_series: TimeSeriesData
    prefill: list[PrefillFit]
    outcomes: list[OutcomeCount]
    error_samples: list[ErrorSample]
    fidelity: ClientFidelity
    correlation: CorrelationReport
    alerts: list[AlertResult]
    gaps: list[TelemetryGap]
    notes: list[str] = field(default_factory=list)
    reads: list[ReadDelivery] = field(default_factory=list)  # per summary row
    window: MeasuredWindow | None = None  # what every rate in `summaries` is divided by
    structured: list[StructuredShare] = field(default_factory=list)  # JSON-schema answers
    loads: list[WorkloadLoad] = field(default_factory=list)  # each workload's real load
    sections: dict[str, Any] = field(default_factory=dict)  # section name → its figures
    silent: list[str] = field(default_factory=list)  # workloads that sent no request

    @property
    def total(self) -> WorkloadSummary:
        """The run-wide summary row (the only row when there is one workload)."""
        return self.summaries[-1]

    # Built-in sections' figures read beside their own section, typed (the verdict and
    # the console summary read the token counts, the sessions section its own figures).
    @property
    def token_counts(self) -> TokenCounts | None:
        """The client's counts beside the server's."""
        return cast(TokenCounts | None, self.sections.get("token_counts"))

    @property
    def sessions(self) -> SessionAnalysis | None:
        """Conversations, caches, reasoning, tools."""
        return cast(SessionAnalysis | None, self.sections.get("sessions"))


@dataclass(frozen=True)
class SectionInputs:
    """What a section's analysis gets beside the run's records: the settings, the
    run's analysis windows (one time axis for every chart), its measured window (what
    every rate is divided by) and its telemetry as lanes (read once per run)."""

    settings: AnalysisSettings
    timeline: Timeline
    window: MeasuredWindow
    lanes: list[Lane]


SectionAnalysis = Callable[[RunData, SectionInputs], Any]
_SECTION_ANALYSES: dict[str, SectionAnalysis] = {}


def register_section_analysis(name: str, analyse: SectionAnalysis) -> None:
    """Compute `analyse(run, inputs)` for every run into `RunAnalysis.sections[name]`
    (None: the run has nothing for that section). A name holds one analysis."""
    known = _SECTION_ANALYSES.get(name)
    if known is not None and known is not analyse:
        raise ValueError(f"report section {name!r} already has an analysis")
    _SECTION_ANALYSES[name] = analyse


def unregister_section_analysis(name: str) -> None:
    _SECTION_ANALYSES.pop(name, None)


def section_analysis(name: str) -> SectionAnalysis | None:
    return _SECTION_ANALYSES.get(name)


def _analyse_sections(run: RunData, inputs: SectionInputs) -> dict[str, Any]:
    return {name: analyse(run, inputs) for name, analyse in _SECTION_ANALYSES.items()}


def analyse_run(run: RunData, settings: AnalysisSettings | None = None) -> RunAnalysis:
    settings = settings or AnalysisSettings()
    notes = list(run.notes)
    requests, telemetry, manifest = run.requests, run.telemetry, run.manifest
    duration = manifest.get("duration_s")
    timeline = run_timeline(requests, telemetry, settings.window_s, fallback_duration_s=duration)
    pools = ItlPools(requests, run.itl)  # ~the size of the ITL column: dropped below
    zero_runs = longest_zero_runs(run.itl)
    # the gaps' float32 shadows have had their last reader (1.25 GB at ten million
    # requests): dropped before the other analyses' copies, read again only if a later
    # one asks (issue 42)
    run.itl.release()
    summary = summarise_run(run, pools=pools)
    notes += summary.notes
    summaries = summary.summaries
    reads = summarise_reads(requests, run.itl, [s.workload for s in summaries], pools,
                            zero_runs)
    del pools, zero_runs
    lanes = telemetry_lanes(telemetry)
    rules = _rules(settings)
    window_latency = latency_series(requests, timeline)
    window_load = load_series(requests, timeline, summary.window.weight)
    alerts = evaluate_rules(
        rules, lanes, _window_series(timeline, window_latency, window_load), timeline.t0
    )
    window_lanes = lane_windows(lanes, timeline)
    correlation = find_drivers(
        window_latency,
        lane_windows(driver_lanes(lanes), timeline),
        CorrelationSettings(
            window_s=settings.window_s,
            max_lag_windows=settings.max_lag_windows,
            fdr=settings.fdr,
            min_abs_rho=settings.min_abs_rho,
        ),
    )
    return RunAnalysis(
        label=run.label,
        manifest=manifest,
        settings=settings,
        timeline=timeline,
        summaries=summaries,
        slo_results=summary.slo_results,
        cdfs=_cdfs(summaries),
        charts_series=_chart_series(
            requests, lanes, timeline, (window_load, window_latency, window_lanes),
            summary.window.weight,
        ),
        prefill=fit_prefill(requests),
        outcomes=outcome_counts(requests),
        error_samples=error_samples(requests, timeline.t0),
        fidelity=assess_fidelity(requests, lanes, manifest.get("client_fidelity")),
        correlation=correlation,
        alerts=alerts,
        gaps=telemetry_gaps(telemetry),
        notes=notes,
        reads=reads,
        window=summary.window,
        loads=workload_loads(requests, summary.window),
        structured=structured_shares(requests),
        sections=_analyse_sections(
            run, SectionInputs(settings, timeline, summary.window, lanes)),
        silent=summary.silent,
    )


def _rules(settings: AnalysisSettings) -> list[AlertRule]:
    if settings.alert_rules is None:
        return load_rules(DEFAULT_ALERT_RULES)
    return list(settings.alert_rules)


def _window_series(
    timeline: Timeline, *frames: pd.DataFrame
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Window series keyed by column, timestamped at window centres (for alerts)."""
    centres = timeline.t0 + timeline.starts_s + timeline.window_s / 2.0
    return {
        str(column): (centres, frame[column].to_numpy(dtype=float))
        for frame in frames
        for column in frame.columns
    }


def _cdfs(
    summaries: Sequence[WorkloadSummary],
) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """metric → workload → CDF points, as computed with each workload's summary."""
    out: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for metric in CDF_METRICS:
        out[metric] = {
            s.workload: cdf
            for s in summaries
            if s.workload != ALL_WORKLOADS
            and metric in s.latency
            and (cdf := s.latency[metric].cdf) is not None
        }
    return out


def _chart_series(
    requests: pd.DataFrame,
    lanes: list[Lane],
    timeline: Timeline,
    analysis_frames: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame],
    weight: float,
) -> TimeSeriesData:
    """Series for the charts: the analysis windows themselves when there are few
    enough of them, else whole multiples of them (≤ MAX_CHART_POINTS per series);
    `weight`: requests each record stands for."""
    chart_timeline = timeline.coarsened(MAX_CHART_POINTS)
    if chart_timeline == timeline:
        load, latency, lane_means = analysis_frames
    else:
        load = load_series(requests, chart_timeline, weight)
        latency = latency_series(requests, chart_timeline)
        lane_means = lane_windows(lanes, chart_timeline)
    return TimeSeriesData(
        timeline=chart_timeline,
        load=load,
        latency=latency,
        schedule_lag=schedule_lag_series(requests, chart_timeline),
        outcomes=outcome_series(requests, chart_timeline),
        lanes=lane_means,
        lane_metrics={lane.key: lane.metric for lane in lanes},
        lane_labels={lane.key: _legend_labels(lane) for lane in lanes},
        lane_sources={lane.key: lane.source for lane in lanes},
    )


def _legend_labels(lane: Lane) -> dict[str, str]:
    """A lane's labels, with its source when the source is part of its key (two
    sources reporting the same series)."""
    if lane.key.endswith(f"@{lane.source}"):
        return {**lane.labels, "source": lane.source}
    return dict(lane.labels)


# --- the built-in sections' analyses (their pages: report/sections.py) ---------------
register_section_analysis("budget", lambda run, _: time_budget(run.requests, run.telemetry))
register_section_analysis("pd_split", lambda run, _: pd_split(run.requests))
register_section_analysis("adapters", lambda run, _: summarise_adapters(run.requests))
register_section_analysis(
    "policy", lambda run, inputs: summarise_policy(run.requests, inputs.settings.window_s))
register_section_analysis("token_counts", lambda run, _: summarise_token_counts(run.requests))
register_section_analysis("sessions", lambda run, inputs: summarise_sessions(
    run.requests, run.telemetry, inputs.timeline.coarsened(MAX_CHART_POINTS)))
register_section_analysis(
    "spec_decode", lambda run, inputs: summarise_spec_decode(run, inputs.window))
register_section_analysis(
    "energy", lambda run, inputs: summarise_energy(run, inputs.window, inputs.lanes))
register_section_analysis(
    "saturation", lambda run, _: saturation_figures(run))
register_section_analysis("probe", lambda run, inputs: summarise_probe(
    run, inputs.timeline.coarsened(MAX_CHART_POINTS)))
register_section_analysis(
    "microbench",
    lambda run, _: summarise_microbench(run.microbench) if run.microbench else None)
