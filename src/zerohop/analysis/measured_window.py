"""The measured window: the one interval every rate of a run is divided by.

Achieved req/s, goodput and tokens/s all mean "what the target carried while the load
was offered", so they share one window (docs/design.md, "The measured window"):

* its length is the load's duration as the manifest records it (`load.duration_s`,
  or Locust's own `config.run_time` for a bare `locust` run): the time the load was
  offered, with the set-up before it and the drain after it left out;
* it opens at the run's first arrival (the earliest scheduled or sent time);
* a run a signal stopped early (the manifest's `load_stopped_ts`) ends there: it
  offered load for less than its planned duration, and dividing by the plan would
  understate every rate;
* a request counts towards the rates when it ended inside it;
* the offered rate also counts the arrivals a `--max-concurrency` cap held until the
  run ended (`RunData.not_sent`): due inside the window, never sent;
* each record stands for `weight` requests: 1 for a live run; more for a simulation
  (`zerohop simulate`) that ran k of its N replicas or kept a sample of its records,
  as its manifest's `simulation` section says, so its rates are the whole fleet's.

A run bounded by a request count (`zerohop run --requests N`, the manifest's
`load.requests`) ends when its requests have: its duration is only a cap, and its window
is its records' span (first arrival → last end), the time it really measured.

Otherwise the span of the records (first send → last end) is only a fallback, for a
manifest that lacks the duration: divided by it, a short or sparse run, whose sends cover less
than the load's duration, overstates what the target carried.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import RunData
from zerohop.core.layout import LOAD_STOPPED_KEY

WindowSource = Literal["manifest", "records", "manifest wall clock", "none"]


@dataclass(frozen=True)
class MeasuredWindow:
    """`[start_ts, end_ts]` in the records' clock. `start_ts` is NaN when the records
    carry no timestamps: every request then counts, over the manifest's length."""

    start_ts: float
    duration_s: float
    source: WindowSource
    weight: float = 1.0  # requests each record stands for (see record_weight)
    # per workload, when each arrival never sent was due (`RunData.not_sent`): counted
    # by `offered` and by nothing else
    not_sent: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def end_ts(self) -> float:
        return self.start_ts + self.duration_s

    def rate(self, count: float) -> float:
        """Per second over the window, of `count` records (each standing for `weight`
        requests); NaN without a window."""
        if not self.duration_s or math.isnan(self.duration_s):
            return math.nan
        return count * self.weight / self.duration_s

    def arrived(self, requests: pd.DataFrame) -> np.ndarray:
        """Per request: did it arrive (its scheduled time, else its send) inside the
        window? These are the requests the offered rate counts."""
        if math.isnan(self.start_ts):
            return np.ones(len(requests), dtype=bool)
        arrival = _arrival_ts(requests)
        with np.errstate(invalid="ignore"):
            return (arrival >= self.start_ts) & (arrival < self.end_ts)

    def offered(self, requests: pd.DataFrame, mask: np.ndarray,
                workload: str | None = None) -> float:
        """The rate the selected requests were offered at: those that arrived in the
        window, and the arrivals of `workload` (None: of every workload) that a cap held
        until the end, per second of it. A window read from the records (a `--requests`
        run) also holds the drain after the last arrival, so there scheduled arrivals are
        counted over their own span instead, (n − 1) gaps over first → last due time:
        200 arrivals due at 20 req/s are 20 req/s offered however long a
        `--max-concurrency` cap kept them waiting."""
        arrived = mask & self.arrived(requests)
        held = self._not_sent_in_window(workload)
        if self.source != "records":
            return self.rate(int(arrived.sum()) + held.size)
        due = requests["scheduled_ts"].to_numpy(dtype=float)[arrived]
        timed = np.concatenate([due[np.isfinite(due)], held])
        span = float(timed.max() - timed.min()) if timed.size > 1 else 0.0
        if span <= 0:
            return self.rate(int(arrived.sum()) + held.size)
        untimed = self.rate(int(arrived.sum()) - (timed.size - held.size))  # closed loop
        return (timed.size - 1) * self.weight / span + untimed

    def _not_sent_in_window(self, workload: str | None) -> np.ndarray:
        parts = [self.not_sent.get(workload, np.empty(0))] if workload is not None \
            else list(self.not_sent.values())
        due = np.concatenate(parts) if parts else np.empty(0)
        if math.isnan(self.start_ts):
            return due
        return due[(due >= self.start_ts) & (due < self.end_ts)]

    def counts(self, requests: pd.DataFrame) -> np.ndarray:
        """Per request: did it end inside the window (a record without an end time:
        did it start inside it)? These are the requests the rates count."""
        if math.isnan(self.start_ts):
            return np.ones(len(requests), dtype=bool)
        end = requests["end_ts"].to_numpy(dtype=float)
        placed = np.where(np.isfinite(end), end, _arrival_ts(requests))
        with np.errstate(invalid="ignore"):
            return (placed >= self.start_ts) & (placed <= self.end_ts)


def measured_window(run: RunData) -> MeasuredWindow:
    """The run's measured window (see the module docstring)."""
    window = window_of(run.requests, run.manifest)
    if run.not_sent.empty:
        return window
    held = run.not_sent.groupby("workload", observed=True)["scheduled_ts"]
    return replace(window, not_sent={str(name): due.to_numpy(dtype=float)
                                     for name, due in held})


def record_weight(manifest: Mapping[str, Any]) -> float:
    """How many requests each record stands for: N ÷ k for a simulation of k of its N
    replicas, ÷ the share of records it kept; 1 for everything else."""
    simulation = manifest.get("simulation")
    if not isinstance(simulation, Mapping):
        return 1.0
    replicas = _positive(simulation.get("replicas")) or 1.0
    simulated = _positive(simulation.get("simulated_replicas")) or replicas
    sample = _positive(simulation.get("record_sample")) or 1.0
    return replicas / simulated / min(sample, 1.0)


def window_of(requests: pd.DataFrame, manifest: Mapping[str, Any]) -> MeasuredWindow:
    """The window of these records under this manifest. In order: the manifest's load
    duration from the first arrival (to the stop, for a run stopped early); the
    records' span (first arrival → last end); with no timestamps at all, the
    manifest's load duration, else its wall-clock `duration_s` (set-up included:
    nothing better is known)."""
    return replace(_window_of(requests, manifest), weight=record_weight(manifest))


def _window_of(requests: pd.DataFrame, manifest: Mapping[str, Any]) -> MeasuredWindow:
    arrivals = _arrival_ts(requests)
    arrivals = arrivals[np.isfinite(arrivals)]
    ends = requests["end_ts"].to_numpy(dtype=float)
    ends = ends[np.isfinite(ends)]
    # a run bounded by a request count (`--requests`) ends when they have: its duration
    # is only a cap, and the time it measured is its records' span
    load_s = None if _request_bounded(manifest) else load_duration_s(manifest)
    if arrivals.size and load_s is not None:
        first = float(arrivals.min())
        return MeasuredWindow(first, _cut_short(load_s, first, manifest), "manifest")
    if arrivals.size and ends.size and ends.max() > arrivals.min():
        first = float(arrivals.min())
        return MeasuredWindow(first, float(ends.max()) - first, "records")
    if load_s is not None:
        return MeasuredWindow(math.nan, load_s, "manifest")
    wall_s = _positive(manifest.get("duration_s"))
    if wall_s is not None:
        return MeasuredWindow(math.nan, wall_s, "manifest wall clock")
    return MeasuredWindow(math.nan, math.nan, "none")


def _cut_short(load_s: float, first: float, manifest: Mapping[str, Any]) -> float:
    """The load's length from its first arrival, ended early where the manifest says
    a signal stopped it before the planned end."""
    stopped = _positive(manifest.get(LOAD_STOPPED_KEY))
    if stopped is None or stopped <= first:
        return load_s
    return min(load_s, stopped - first)


def load_duration_s(manifest: Mapping[str, Any]) -> float | None:
    """How long the load was offered, as the manifest records it: `load.duration_s`
    (`zerohop run`, sweep and nightly points), else `config.run_time` (the options of
    a bare `locust` run); None when it records neither."""
    load = manifest.get("load")
    if isinstance(load, Mapping):
        seconds = _positive(load.get("duration_s"))
        if seconds is not None:
            return seconds
    config = manifest.get("config")
    if isinstance(config, Mapping):
        return _positive(config.get("run_time"))
    return None


def _request_bounded(manifest: Mapping[str, Any]) -> bool:
    load = manifest.get("load")
    return isinstance(load, Mapping) and _positive(load.get("requests")) is not None


def _arrival_ts(requests: pd.DataFrame) -> np.ndarray:
    """When each request arrived: its scheduled time, else when it was sent."""
    scheduled = requests["scheduled_ts"].to_numpy(dtype=float)
    return np.where(np.isfinite(scheduled), scheduled, requests["sent_ts"].to_numpy(dtype=float))


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None
