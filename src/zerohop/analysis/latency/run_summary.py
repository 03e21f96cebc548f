"""Summarise a run: the good mask, the per-workload summary over the measured window,
and the SLO verdict — the one assembly the report, the console summary, sweep,
capacity, calibrate and nightly all read their figures from, so none of them can
disagree with the page about what a run showed.

Pure: takes a loaded `RunData` (`storage.run_reader.load_run` does the loading).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from zerohop.analysis.itl_pools import ItlPools
from zerohop.analysis.latency.slo import SloResult, SloTarget, evaluate_slos, good_mask, parse_slos
from zerohop.analysis.latency.summary import (
    ALL_WORKLOADS,
    WorkloadSummary,
    summarise,
    summarise_workloads,
)
from zerohop.analysis.measured_window import MeasuredWindow, measured_window
from zerohop.analysis.run_data import RunData


@dataclass(frozen=True)
class RunSummary:
    window: MeasuredWindow
    targets: list[SloTarget]
    good: np.ndarray  # per request: ok and within every SLO threshold
    summaries: list[WorkloadSummary]  # never empty: a run with no record has an `all` row
    slo_results: list[SloResult]
    notes: list[str]  # SLO keys that were not understood
    # workloads the run ran that sent no request (e.g. fewer users than workloads):
    # named, not judged
    silent: list[str]

    @property
    def total(self) -> WorkloadSummary:
        """The run-wide row (the only row when there is one workload)."""
        return self.summaries[-1]

    @property
    def workloads(self) -> list[WorkloadSummary]:
        """The per-workload rows, without the run-wide `all` row (which only a run of
        several workloads has)."""
        return self.summaries[:-1] if len(self.summaries) > 1 else list(self.summaries)


def summarise_run(
    run: RunData, slos: Mapping[str, Any] | None = None, pools: ItlPools | None = None
) -> RunSummary:
    """`run` judged against `slos` (None: the run's own; `{}`: none, so every ok request
    is good). The run's own are its `--slo` (the manifest's `slo`), which apply to every
    workload; without them, each workload's own `slo:` block (the manifest's
    `workload_slo`) judges that workload's requests and decides their goodput. `pools`:
    the run's sorted ITL gaps, when the caller keeps them for other figures too."""
    targets, notes = parse_slos(run.manifest.get("slo") if slos is None else slos)
    requests = run.requests
    if pools is None:
        pools = ItlPools(requests, run.itl)
    ok = (requests["outcome"] == "ok").to_numpy()
    silent = silent_workloads(run.manifest, set(requests["workload"].unique()))
    good = good_mask(requests, run.itl, targets)
    slo_results = _judge(targets, run, ok, pools, None)
    if slos is None and not targets:
        workload_slo = run.manifest.get("workload_slo") or {}
        for workload, objectives in workload_slo.items():
            if workload in silent:
                continue
            own, own_notes = parse_slos(objectives)
            notes += [f"{workload}: {note}" for note in own_notes]
            rows = (requests["workload"] == workload).to_numpy()
            good = np.where(rows, good_mask(requests, run.itl, own), good)
            results = _judge(own, run, ok & rows, pools, [str(workload)])
            slo_results += [replace(r, workload=str(workload)) for r in results]
    window = measured_window(run)
    summaries = summarise_workloads(requests, run.itl, good, window, pools)
    if not summaries:  # no record at all: one empty `all` row, so every reader has a total
        nothing = np.zeros(len(requests), dtype=bool)
        summaries = [summarise(requests, run.itl, good, nothing, ALL_WORKLOADS, window)]
    return RunSummary(window, targets, good, summaries, slo_results, notes, silent)


def _judge(
    targets: list[SloTarget],
    run: RunData,
    ok: np.ndarray,
    pools: ItlPools,
    workloads: list[str] | None,
) -> list[SloResult]:
    """`evaluate_slos` over the selected ok requests; an ITL objective is read from the
    sorted pools (exact, and no copy of hundreds of millions of gaps)."""
    columns = {t.column for t in targets} - {"itl_ms"}
    results = evaluate_slos(targets, ok_values(run, ok, columns))
    return [
        _itl_result(r, pools, workloads) if r.target.column == "itl_ms" else r for r in results
    ]


def _itl_result(result: SloResult, pools: ItlPools, workloads: list[str] | None) -> SloResult:
    statistic = result.target.statistic
    if statistic in ("mean", "max"):
        observed = pools.distribution(workloads).get(statistic)
    else:
        observed = pools.quantile(workloads, float(statistic[1:]) / 100.0)
    met = None if math.isnan(observed) else observed <= result.target.threshold_ms
    return replace(result, observed_ms=observed, met=met)


def ok_values(run: RunData, ok: np.ndarray, columns: set[str]) -> dict[str, np.ndarray]:
    """Each column's values over the selected requests (ITL: their pooled gaps)."""
    values = {}
    for column in columns:
        if column == "itl_ms":
            values[column] = run.itl.pooled(ok)
        else:
            values[column] = run.requests[column].to_numpy(dtype=float)[ok]
    return values


def silent_workloads(manifest: Mapping[str, Any], sent: set[Any]) -> list[str]:
    """The workloads the run started (the manifest's `workload_selection.names`) that
    sent no request: Locust gives `-u N` users by weight, so N users over more than N
    workloads leave some without one (a layer comparison's one user runs one workload)."""
    names = (manifest.get("workload_selection") or {}).get("names") or []
    return [str(name) for name in names if name not in sent]
