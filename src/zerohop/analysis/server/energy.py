"""Energy per output token and per request, from the GPUs' energy counters.

NVML and DCGM keep a counter of the energy each board used since the driver loaded
(`gpu_energy_j`); its increase over the measured window is that window's energy,
however the power moved between two samples. Per GPU series (one per source and `gpu`
label), the counter is made cumulative across restarts (a decrease means the driver
reloaded and the counter began again from zero, as Prometheus reads a counter reset)
and read at the window's edges by linear interpolation between the samples either side.
Where the samples cover only part of the window, the covered part's mean power stands
for the rest, and `coverage` says how much was measured.

Without a counter (a pre-Volta GPU, an exporter that leaves the field out) the power
gauge (`gpu_power_w`) is integrated instead, trapezoid over its samples: a coarser
estimate, since the power between two samples is not known (and the driver's reading is
itself a 1 s average on recent GPUs), and the summary says so.

Only series with a `gpu` label count: they are one device each. What they do not count
is said in docs/design.md (host CPU, memory, network, GPUs that were not sampled).

The embedded target exports a GPU model's counters on its /metrics, and `zerohop
simulate` writes the same modelled gauges: energy read from those is `modelled`, and
every place that shows it says so. Embedding and rerank requests have no output tokens:
their cost is per item (text or pair), from the records' `items`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from zerohop.analysis.measured_window import MeasuredWindow
from zerohop.analysis.run_data import RunData
from zerohop.analysis.server.modelled import is_modelled_series
from zerohop.analysis.timeseries import Lane, telemetry_lanes

ENERGY_METRIC = "gpu_energy_j"
POWER_METRIC = "gpu_power_w"
Method = Literal["energy counter", "integrated power samples"]
MODELLED_NOTE = "modelled, not measured"
METHOD_NOTES: dict[Method, str] = {
    "energy counter": "from the GPUs' energy counters (exact between samples)",
    "integrated power samples": "integrated from power samples (trapezoid; no energy "
    "counter was recorded): a coarser estimate, the power between samples is unknown",
}


@dataclass(frozen=True)
class GpuEnergy:
    """One device's energy over the part of the window its samples cover."""

    source: str
    gpu: str
    energy_j: float
    covered_s: float
    resets: int  # counter restarts seen inside the window (a driver reload)

    @property
    def mean_power_w(self) -> float:
        return self.energy_j / self.covered_s if self.covered_s > 0 else math.nan


@dataclass(frozen=True)
class EnergySummary:
    """The window's GPU energy and what it bought. Totals are over `gpus`; the window's
    energy is their mean power times the window's length (measured outright where the
    samples span the window: `coverage` 1)."""

    method: Method
    gpus: tuple[GpuEnergy, ...]
    window_s: float
    coverage: float  # share of the window the samples span (the least-covered GPU)
    energy_j: float
    mean_power_w: float
    output_tokens: float
    ok_requests: float
    j_per_output_token: float
    j_per_ok_request: float
    output_tokens_per_j: float
    modelled: bool = False  # from the embedded target's or the virtual clock's GPU model
    items: float = 0.0  # pooling requests' texts or pairs (embeddings, rerank)
    j_per_item: float = math.nan

    @property
    def note(self) -> str:
        if self.modelled:
            return (f"{MODELLED_NOTE}: the embedded target's GPU model, not a measured GPU "
                    f"({METHOD_NOTES[self.method]} of that model)")
        return METHOD_NOTES[self.method]


def summarise_energy(data: RunData, window: MeasuredWindow,
                     lanes: Sequence[Lane] | None = None) -> EnergySummary | None:
    """The run's energy over its measured window; None without an energy counter or a
    power gauge from any GPU, or without a window to measure over. `lanes`: the run's
    `telemetry_lanes`, where the caller has them already (the run's analysis does)."""
    if not window.duration_s > 0:
        return None
    if lanes is None:
        lanes = telemetry_lanes(data.telemetry)
    lanes = [lane for lane in lanes if "gpu" in lane.labels]
    counters = [lane for lane in lanes if lane.metric == ENERGY_METRIC]
    method: Method = "energy counter"
    if not counters:
        counters = [lane for lane in lanes if lane.metric == POWER_METRIC]
        method = "integrated power samples"
    start, end = _edges(window)
    gpus = [g for g in (_gpu_energy(lane, method, start, end) for lane in counters) if g]
    if not gpus:
        return None
    mean_power_w = sum(g.mean_power_w for g in gpus)
    energy_j = mean_power_w * window.duration_s
    requests = data.requests
    carried = (requests["outcome"] == "ok").to_numpy() & window.counts(requests)
    tokens = requests["output_tokens"].to_numpy(dtype=float)[carried]
    output_tokens = float(np.nansum(tokens)) * window.weight
    ok_requests = float(carried.sum()) * window.weight
    items = (float(np.nansum(requests["items"].to_numpy(dtype=float)[carried])) * window.weight
             if "items" in requests else 0.0)
    return EnergySummary(
        method=method,
        gpus=tuple(sorted(gpus, key=lambda g: (g.source, _gpu_order(g.gpu)))),
        window_s=window.duration_s,
        coverage=min(1.0, min(g.covered_s for g in gpus) / window.duration_s),
        energy_j=energy_j,
        mean_power_w=mean_power_w,
        output_tokens=output_tokens,
        ok_requests=ok_requests,
        j_per_output_token=_per(energy_j, output_tokens),
        j_per_ok_request=_per(energy_j, ok_requests),
        output_tokens_per_j=_per(output_tokens, energy_j),
        modelled=is_modelled_source(data.manifest, counters),
        items=items,
        j_per_item=_per(energy_j, items),
    )


def is_modelled_source(manifest: dict[str, object], lanes: Sequence[Lane]) -> bool:
    """Whether these GPU series are a model's (`analysis.modelled`'s one rule)."""
    return all(is_modelled_series(manifest, lane.metric, lane.source) for lane in lanes)


def cumulative_energy(ts: np.ndarray, values: np.ndarray, method: Method
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Joules used from the first sample to each sample, and which steps between two
    samples restarted the counter: a counter's increases (after a restart, its new
    value: it began again from zero), or the trapezoid of power."""
    if method == "energy counter":
        steps = np.diff(values)
        restarted = steps < 0
        steps = np.where(restarted, values[1:], steps)
    else:
        steps = np.diff(ts) * (values[1:] + values[:-1]) / 2.0
        restarted = np.zeros(steps.size, dtype=bool)
    return np.concatenate(([0.0], np.cumsum(steps))), restarted


def _gpu_energy(lane: Lane, method: Method, start: float, end: float) -> GpuEnergy | None:
    keep = np.isfinite(lane.values) & np.isfinite(lane.ts)
    ts, values = lane.ts[keep], lane.values[keep]
    if ts.size < 2:
        return None
    lo, hi = max(start, float(ts[0])), min(end, float(ts[-1]))
    if not hi > lo:
        return None
    used, restarted = cumulative_energy(ts, values, method)
    overlapping = (ts[1:] > lo) & (ts[:-1] < hi)  # steps with time inside the window
    return GpuEnergy(
        source=lane.source,
        gpu=lane.labels["gpu"],
        energy_j=float(np.interp(hi, ts, used) - np.interp(lo, ts, used)),
        covered_s=hi - lo,
        resets=int((restarted & overlapping).sum()),
    )


def _edges(window: MeasuredWindow) -> tuple[float, float]:
    """The window's edges on the telemetry clock; every sample when it has no start."""
    if math.isnan(window.start_ts):
        return -math.inf, math.inf
    return window.start_ts, window.end_ts


def _gpu_order(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)


def _per(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.nan
