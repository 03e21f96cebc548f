"""`zerohop capacity SWEEP_DIR`: from a measured sweep to a capacity plan — the
highest goodput one replica sustains within the SLOs, the knee of the latency curve,
replicas for a traffic forecast (with headroom) and the cost per million output tokens.

Honest by construction: the operating point is a *measured* point (the passing point
with the highest goodput); the SLO-limited load between the last passing and the first
failing point is a linear interpolation and is labelled as an estimate. SLOs are judged
again on each point's raw records (the report's own SLO code), so a sweep run without
SLOs can be planned against any.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from zerohop.core.metrics import needed_n, percentile_fraction
from zerohop.storage.jsonl import without_nan


class TrafficMix(BaseModel):
    """The forecast's request mix: workload name → share of requests (sums to 1)."""

    model_config = ConfigDict(extra="forbid")
    workloads: dict[str, float] = Field(min_length=1)

    @field_validator("workloads")
    @classmethod
    def _shares(cls, value: dict[str, float]) -> dict[str, float]:
        if any(not share > 0 for share in value.values()):
            raise ValueError("every share must be > 0")
        total = sum(value.values())
        if abs(total - 1.0) > 0.01:
            raise ValueError(f"shares must sum to 1 (they sum to {total:g})")
        return value


@dataclass(frozen=True)
class SloCheck:
    key: str
    threshold_ms: float
    observed_ms: float
    met: bool | None


@dataclass(frozen=True)
class CapacityPoint:
    """One sweep point re-judged against the planning SLOs."""

    load: float
    run_dir: str
    offered_rps: float
    achieved_rps: float
    goodput_rps: float
    output_tokens_per_s: float
    mean_output_tokens: float
    error_pct: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    slos: list[SloCheck]
    workload_shares: dict[str, float] = field(default_factory=dict)
    workload_output_tokens: dict[str, float] = field(default_factory=dict)
    # requests with a TTFT / a TPOT: a percentile above is NaN where its n is too small
    ttft_n: int = 0
    tpot_n: int = 0
    # the run's saturation verdict (its summary.json: what its progress line showed and
    # `--stop-when-saturated` acts on), in words: the signal and since when; None when
    # it kept up or has no verdict
    saturated_by: str | None = None

    @property
    def meets_slos(self) -> bool:
        return all(s.met is True for s in self.slos) and self.achieved_rps > 0

    @property
    def candidate(self) -> bool:
        """May be the operating point: meets every SLO and its run did not find itself
        saturated (a saturated point's figures hold only until its backlog grows)."""
        return self.meets_slos and self.saturated_by is None


@dataclass(frozen=True)
class MeasuredKnee:
    """A layer's knee as a layer sweep measured it (`zerohop sweep --compare-layer`):
    the lowest offered rate at which its p50 or p99 cost grew, the rate the layer itself
    carried there (its arm's share: the sweep also sends requests direct), and the
    layer's CPU there."""

    knee_rps: float  # through the layer: the limit one instance carries
    offered_rps: float  # the sweep's offered rate at the knee, every arm together
    stat: str  # the percentile whose cost grew first
    cpu_pct: float | None  # the layer process's mean CPU at the knee, % of one core
    rss_bytes: int | None
    engines_saturated: bool | None

    def describe(self) -> str:
        words = (f"measured: {self.stat} cost grew at {self.offered_rps:g} req/s offered, "
                 f"{self.knee_rps:.4g} through the layer")
        if self.cpu_pct is not None:
            words += f", layer CPU {self.cpu_pct:.1f} % of a core there"
        if self.engines_saturated:
            words += " (the engines were saturated there too: the knee may be theirs)"
        return words


@dataclass(frozen=True)
class Forecast:
    peak_qps: float | None = None
    headroom: float = 0.2
    gpu_cost_per_hour: float | None = None
    gpus_per_replica: int = 1
    mix: TrafficMix | None = None
    layer_knees: dict[str, float] = field(default_factory=dict)  # layer → req/s per instance
    # layer → how its knee was measured (a layer sweep's index); absent: given by hand
    measured_layers: dict[str, MeasuredKnee] = field(default_factory=dict)


@dataclass(frozen=True)
class LayerLimit:
    """A layer in front of the replicas (a router, a proxy) as a limit of its own: one
    instance carries `knee_rps` before its added latency grows (measured on the layer,
    docs/layers.md), whatever the engines behind it could take."""

    name: str
    knee_rps: float
    replicas_per_instance: float | None  # knee ÷ one replica's goodput: the fan-out it feeds
    instances: int | None  # for the forecast peak with headroom
    measured: MeasuredKnee | None = None  # None: given by hand (--layer NAME=REQ_PER_S)

    def describe(self) -> str:
        """The limit in words: the replicas one instance feeds, the instances needed."""
        words = f"knee {self.knee_rps:.4g} req/s per instance"
        if self.measured is not None:
            words += f" ({self.measured.describe()})"
        feeds = self.replicas_per_instance
        if feeds is not None and feeds < 1:
            words += (f" = {feeds:.2g} of one replica's goodput (the layer is the "
                      "bottleneck before the first replica is full)")
        elif feeds is not None:
            words += (f" = the goodput of {feeds:.3g} replicas (past {math.floor(feeds)} "
                      "replicas per instance, the layer is the bottleneck)")
        if self.instances is not None:
            words += f"; instances for the peak with headroom: {self.instances}"
        return words


@dataclass
class CapacityPlan:
    mode: str
    slo: dict[str, float]
    points: list[CapacityPoint]
    operating_point: CapacityPoint | None
    slo_limited_load_estimate: float | None  # interpolated between two measured points
    slo_limited_by: str | None
    knee: CapacityPoint | None
    max_goodput_rps: float | None
    replicas: int | None
    cost_per_million_output_tokens: float | None
    forecast: Forecast
    notes: list[str] = field(default_factory=list)
    layers: list[LayerLimit] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["forecast"]["mix"] = (
            self.forecast.mix.workloads if self.forecast.mix is not None else None
        )
        return without_nan(data)


def plan_capacity(
    points: Sequence[CapacityPoint], slo: dict[str, float], forecast: Forecast, mode: str = "rate"
) -> CapacityPlan:
    """The capacity plan from measured points (pure)."""
    ordered = sorted(points, key=lambda p: p.load)
    notes: list[str] = []
    passing = [p for p in ordered if p.candidate]
    operating = max(passing, key=lambda p: p.goodput_rps) if passing else None
    saturated = [p for p in ordered if p.saturated_by is not None]
    if saturated:
        notes.append("saturated by its run's own verdict, so not an operating point: "
                     + "; ".join(f"{p.load:g} ({p.saturated_by})" for p in saturated))
    if operating is None:
        notes.append("no measured point meets every SLO: sweep lower loads or relax the SLOs")
    estimate, limited_by = _slo_limited_load(ordered, operating)
    knee = find_knee(ordered)
    replicas = None
    if forecast.peak_qps is not None and operating is not None and operating.goodput_rps > 0:
        replicas = math.ceil(forecast.peak_qps * (1.0 + forecast.headroom) / operating.goodput_rps)
    cost = None
    if forecast.gpu_cost_per_hour is not None and operating is not None:
        tokens_per_hour = operating.output_tokens_per_s * 3600.0
        if tokens_per_hour > 0:
            cost = forecast.gpu_cost_per_hour * forecast.gpus_per_replica / tokens_per_hour * 1e6
    if forecast.mix is not None and operating is not None:
        notes += _mix_notes(forecast.mix, operating)
    if operating is not None and operating is ordered[-1]:
        notes.append("the highest swept load still meets the SLOs: the true limit is higher")
    layers = layer_limits(forecast, operating.goodput_rps if operating else None)
    return CapacityPlan(
        mode=mode, slo=dict(slo), points=list(ordered), operating_point=operating,
        slo_limited_load_estimate=estimate, slo_limited_by=limited_by, knee=knee,
        max_goodput_rps=operating.goodput_rps if operating else None, replicas=replicas,
        cost_per_million_output_tokens=cost, forecast=forecast, notes=notes, layers=layers,
    )


def layer_limits(forecast: Forecast, replica_goodput_rps: float | None) -> list[LayerLimit]:
    """Each layer's instances for the forecast and the replicas one instance can feed:
    past that many replicas the layer, not the engines, is the next bottleneck."""
    limits = []
    for name, knee_rps in forecast.layer_knees.items():
        per_instance = (knee_rps / replica_goodput_rps
                        if replica_goodput_rps is not None and replica_goodput_rps > 0 else None)
        instances = (math.ceil(forecast.peak_qps * (1.0 + forecast.headroom) / knee_rps)
                     if forecast.peak_qps is not None else None)
        limits.append(LayerLimit(name, knee_rps, per_instance, instances,
                                 forecast.measured_layers.get(name)))
    return limits


def measured_knees(layer_knee: dict[str, Any] | None) -> dict[str, MeasuredKnee]:
    """A layer sweep's `index.json` `layer_knee` → each layer's measured knee: the lower
    of its p50 and p99 knees (the first percentile to grow limits it), as the rate
    through the layer (the offered rate where the share is unknown). A layer with no
    knee within the rates tried has no measured limit."""
    knees: dict[str, MeasuredKnee] = {}
    for name, by_stat in ((layer_knee or {}).get("layers") or {}).items():
        found = [k for k in by_stat.values() if isinstance(k, dict)
                 and isinstance(k.get("rate"), int | float) and k["rate"] > 0]
        if not found:
            continue
        first = min(found, key=lambda k: k["rate"])
        process = first.get("process") or {}
        cpu, rss = process.get("cpu_pct_mean"), process.get("rss_bytes_max")
        through = first.get("layer_rps")
        knees[str(name)] = MeasuredKnee(
            float(through) if isinstance(through, int | float) and through > 0
            else float(first["rate"]), float(first["rate"]), str(first.get("stat")),
            float(cpu) if isinstance(cpu, int | float) else None,
            int(rss) if isinstance(rss, int | float) else None,
            first.get("engines_saturated"))
    return knees


def find_knee(points: Sequence[CapacityPoint]) -> CapacityPoint | None:
    """Kneedle on p50 TTFT vs load (p50: a short run's p99 is too noisy to locate a
    bend): after normalising both axes to [0, 1], the point farthest below the straight
    line from the first to the last point — where latency starts rising faster than
    load. Needs three points with a rising curve."""
    usable = [p for p in points if math.isfinite(p.ttft_p50_ms)]
    if len(usable) < 3:
        return None
    xs = [p.load for p in usable]
    ys = [p.ttft_p50_ms for p in usable]
    x_span, y_span = xs[-1] - xs[0], max(ys) - min(ys)
    if x_span <= 0 or y_span <= 0 or ys[-1] <= ys[0]:
        return None
    gaps = [(x - xs[0]) / x_span - (y - min(ys)) / y_span for x, y in zip(xs, ys, strict=True)]
    best = max(range(len(usable)), key=lambda i: gaps[i])
    return usable[best] if gaps[best] > 0 else None


def _slo_limited_load(
    ordered: Sequence[CapacityPoint], operating: CapacityPoint | None
) -> tuple[float | None, str | None]:
    """Linear interpolation, per missed SLO, of the load where it crosses its threshold
    between the operating point and the next (failing) point; the tightest wins."""
    if operating is None:
        return None, None
    above = [p for p in ordered if p.load > operating.load]
    if not above:
        return None, None
    nxt = above[0]
    best: tuple[float, str] | None = None
    for low, high in zip(operating.slos, nxt.slos, strict=True):
        if high.met is not False:
            continue
        if not (math.isfinite(low.observed_ms) and math.isfinite(high.observed_ms)):
            continue
        rise = high.observed_ms - low.observed_ms
        fraction = (low.threshold_ms - low.observed_ms) / rise if rise > 0 else 0.0
        load = operating.load + min(max(fraction, 0.0), 1.0) * (nxt.load - operating.load)
        if best is None or load < best[0]:
            best = (load, low.key)
    if best is None:  # failed on errors or throughput rather than a latency SLO
        return None, "errors or throughput" if not nxt.meets_slos else None
    return best


def _mix_notes(mix: TrafficMix, operating: CapacityPoint) -> list[str]:
    notes = []
    missing = sorted(set(mix.workloads) - set(operating.workload_shares))
    if missing:
        notes.append(f"mix workloads not in the sweep: {', '.join(missing)} — "
                     "the plan does not cover them")
    for name, share in mix.workloads.items():
        measured = operating.workload_shares.get(name, 0.0)
        if abs(measured - share) > 0.1:
            notes.append(f"workload {name}: forecast share {share:.0%} vs swept {measured:.0%} "
                         "— capacity measured on a different mix")
    return notes


# --- measuring the points ------------------------------------------------------------
def measure_points(sweep_dir: Path, slo: dict[str, float]) -> tuple[str, list[CapacityPoint]]:
    """Each point of the sweep index, re-judged on its records against `slo`."""
    from zerohop.planning.sweep import read_index

    index = read_index(sweep_dir)
    return _measure_index(sweep_dir, index, slo)


def measure_sweep(sweep_dir: Path, slo: dict[str, float]
                  ) -> tuple[str, list[CapacityPoint], dict[str, MeasuredKnee]]:
    """`measure_points`, and the layers' knees when the sweep priced layers."""
    from zerohop.planning.sweep import read_index

    index = read_index(sweep_dir)
    mode, points = _measure_index(sweep_dir, index, slo)
    return mode, points, measured_knees(index.get("layer_knee"))


def _measure_index(sweep_dir: Path, index: dict[str, Any], slo: dict[str, float]
                   ) -> tuple[str, list[CapacityPoint]]:
    points = [
        measure_point(Path(sweep_dir) / p.run_dir, p.load, p.offered_rps, slo)
        for p in index["points"]
    ]
    return str(index.get("mode", "rate")), points


def live_saturation(run_dir: Path) -> str | None:
    """The signal by which the run's saturation verdict (its summary.json, the verdict
    its progress line showed and `--stop-when-saturated` acts on) found it saturated, in
    words; None when it kept up or has no verdict."""
    from zerohop.planning.sweep_stop import point_saturation
    from zerohop.report.present_saturation import SIGNAL_WORDS

    block = point_saturation(Path(run_dir))
    if not block or not block.get("saturated"):
        return None
    signal = str(block.get("signal"))
    return f"{SIGNAL_WORDS.get(signal, signal)} since {float(block.get('since_s') or 0):.0f} s"


def measure_point(run_dir: Path, load: float, offered_rps: float,
                  slo: dict[str, float]) -> CapacityPoint:
    """One point re-judged against `slo`. A layer sweep's point (its records carry
    arms) is judged on its `direct` arm, the engines without the hop — the latencies,
    the SLO checks and the share of good requests — while the engines' throughput is
    every arm's (they served them all); the index's offered rate, the direct arm's
    share, is scaled back to the whole."""
    import numpy as np

    from zerohop.analysis.comparison.arms import BASE_ARM, arm_views
    from zerohop.analysis.latency.run_summary import summarise_run
    from zerohop.storage.run_reader import load_run

    run = load_run(run_dir)
    direct = arm_views(run).get(BASE_ARM) if len(run.requests) else None
    summary = summarise_run(direct or run, slos=slo)
    whole = summarise_run(run, slos=slo).total if direct is not None else summary.total
    if direct is not None:
        offered_rps /= len(direct.requests) / len(run.requests)
    frame = run.requests
    total = summary.total
    good_share = total.goodput_rps / total.req_per_s if total.req_per_s else 0.0
    ok = (frame["outcome"] == "ok").to_numpy()
    checks = [
        SloCheck(r.target.key, r.target.threshold_ms, r.observed_ms, r.met)
        for r in summary.slo_results
    ]
    counts = {r.workload: r.requests for r in summary.workloads}
    n = sum(counts.values()) or 1
    out_tokens = frame["output_tokens"].to_numpy(dtype=float)
    workload_col = frame["workload"].astype(str).to_numpy()

    def mean_out(mask: np.ndarray) -> float:
        chosen = out_tokens[mask & ok]
        chosen = chosen[np.isfinite(chosen)]
        return float(chosen.mean()) if chosen.size else math.nan

    def stat(metric: str, name: str) -> float:  # NaN where its n is too small for it
        dist = total.latency.get(metric)
        if dist is None or dist.n < needed_n(percentile_fraction(name)):
            return math.nan
        return float(dist.get(name))

    def count(metric: str) -> int:
        dist = total.latency.get(metric)
        return int(dist.n) if dist is not None else 0

    return CapacityPoint(
        load=load, run_dir=str(run_dir), offered_rps=offered_rps,
        achieved_rps=whole.req_per_s, goodput_rps=whole.req_per_s * good_share,
        output_tokens_per_s=whole.output_tokens_per_s,
        mean_output_tokens=mean_out(np.ones(len(frame), dtype=bool)),
        error_pct=whole.error_pct,
        ttft_p50_ms=stat("ttft_ms", "p50"), ttft_p99_ms=stat("ttft_ms", "p99"),
        tpot_p50_ms=stat("tpot_ms", "p50"), tpot_p99_ms=stat("tpot_ms", "p99"),
        slos=checks,
        workload_shares={w: c / n for w, c in counts.items()},
        workload_output_tokens={w: mean_out(workload_col == w) for w in counts},
        ttft_n=count("ttft_ms"), tpot_n=count("tpot_ms"), saturated_by=live_saturation(run_dir),
    )
