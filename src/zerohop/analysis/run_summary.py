"""Summarise a run: the good mask, the per-workload summary over the measured window,
and the SLO verdict — the one assembly the report, the console summary, sweep,
capacity, calibrate and nightly all read their figures from, so none of them can
disagree with the page about what a run showed.

Pure: takes a loaded `RunData` (`storage.run_reader.load_run` does the loading).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from zerohop.analysis.measured_window import MeasuredWindow, measured_window
from zerohop.analysis.run_data import RunData
from zerohop.analysis.slo import SloResult, SloTarget, evaluate_slos, good_mask, parse_slos
from zerohop.analysis.summary import (
    ALL_WORKLOADS,
    WorkloadSummary,
    summarise,
    summarise_workloads,
)


@dataclass(frozen=True)
class RunSummary:
    window: MeasuredWindow
    targets: list[SloTarget]
    good: np.ndarray  # per request: ok and within every SLO threshold
    summaries: list[WorkloadSummary]  # never empty: a run with no record has an `all` row
    slo_results: list[SloResult]
    notes: list[str]  # SLO keys that were not understood

    @property
    def total(self) -> WorkloadSummary:
        """The run-wide row (the only row when there is one workload)."""
        return self.summaries[-1]

    @property
    def workloads(self) -> list[WorkloadSummary]:
        """The per-workload rows, without the run-wide `all` row (which only a run of
        several workloads has)."""
        return self.summaries[:-1] if len(self.summaries) > 1 else list(self.summaries)


def summarise_run(run: RunData, slos: Mapping[str, Any] | None = None) -> RunSummary:
    """`run` judged against `slos` (None: the run's own; `{}`: none, so every ok request
    is good). The run's own are its `--slo` (the manifest's `slo`), which apply to every
    workload; without them, each workload's own `slo:` block (the manifest's
    `workload_slo`) judges that workload's requests and decides their goodput."""
    targets, notes = parse_slos(run.manifest.get("slo") if slos is None else slos)
    requests = run.requests
    ok = (requests["outcome"] == "ok").to_numpy()
    good = good_mask(requests, run.itl, targets)
    slo_results = evaluate_slos(targets, ok_values(run, ok, {t.column for t in targets}))
    if slos is None and not targets:
        workload_slo = run.manifest.get("workload_slo") or {}
        for workload, objectives in workload_slo.items():
            own, own_notes = parse_slos(objectives)
            notes += [f"{workload}: {note}" for note in own_notes]
            rows = (requests["workload"] == workload).to_numpy()
            good = np.where(rows, good_mask(requests, run.itl, own), good)
            values = ok_values(run, ok & rows, {t.column for t in own})
            slo_results += [replace(r, workload=str(workload)) for r in evaluate_slos(own, values)]
    window = measured_window(run)
    summaries = summarise_workloads(requests, run.itl, good, window)
    if not summaries:  # no record at all: one empty `all` row, so every reader has a total
        nothing = np.zeros(len(requests), dtype=bool)
        summaries = [summarise(requests, run.itl, good, nothing, ALL_WORKLOADS, window)]
    return RunSummary(window, targets, good, summaries, slo_results, notes)


def ok_values(run: RunData, ok: np.ndarray, columns: set[str]) -> dict[str, np.ndarray]:
    """Each column's values over the selected requests (ITL: their pooled gaps)."""
    values = {}
    for column in columns:
        if column == "itl_ms":
            values[column] = run.itl.pooled(ok)
        else:
            values[column] = run.requests[column].to_numpy(dtype=float)[ok]
    return values
