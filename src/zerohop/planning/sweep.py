"""`zerohop sweep`: a series of real runs over request rates (open loop) or
concurrencies (closed loop), one results folder per point and an `index.json`.

Automatic mode finds saturation first (coarse, geometric steps), then samples densely
below it, and stops early at the first over-saturated point, so no time is spent
hammering a server that has already fallen over. A point is saturated when achieved
throughput stops following the offered load, TTFT explodes relative to the lightest
point, or errors appear (`SaturationRule`). Latency growth is judged on the
highest TTFT percentile both points have the requests for (`core.metrics.needed_n`:
p99 needs 100), so a short point's p99, which is its maximum, never decides.

The search (`AutoSearch`) and the judgement (`judge_saturation`) are pure; only
`run_sweep` starts runs (through `runner.run_once`, injectable for tests).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import click

from zerohop.core.atomic_file import write_text_atomically
from zerohop.core.metrics import needed_n, percentile_fraction
from zerohop.core.redaction import known_secrets, redact
from zerohop.planning.layer_process import LayerProcessWatch
from zerohop.planning.sweep_layers import echo_layer_point, layer_point
from zerohop.planning.sweep_page import write_sweep_page
from zerohop.planning.sweep_stop import (
    EarlyStop,
    early_stop,
    point_saturation,
    verdict_reason,
)
from zerohop.runner.compare_layer import LayerSetup, start_targets
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import RunResult, run_once

INDEX_FILE = "index.json"
INDEX_SCHEMA = "zerohop.planning.sweep"
INDEX_SCHEMA_VERSION = 1
Mode = Literal["rate", "users"]
Phase = Literal["explicit", "coarse", "dense"]
Runner = Callable[[RunPlan], RunResult]
# the TTFT percentiles the saturation rule may judge, the most telling first
JUDGED_TTFT_STATS = ("p99", "p90", "p50")


@dataclass(frozen=True)
class SaturationRule:
    """When a point counts as over-saturated. Defaults are deliberately loose: a
    short run on a shared machine is noisy, and a false "saturated" only costs
    resolution (the dense phase still samples below it)."""

    min_achieved_ratio: float = 0.8  # rate mode: achieved ok req/s ÷ offered req/s
    min_scaling_gain: float = 0.5  # users mode: share of the ideal throughput gain kept
    # × the lightest point's TTFT at the highest percentile both points' n support
    ttft_growth: float = 10.0
    ttft_floor_ms: float = 50.0  # growth below this absolute level is ignored
    max_error_pct: float = 5.0


@dataclass(frozen=True)
class PointSummary:
    """One sweep point as `index.json` stores it (and `capacity` reads it)."""

    load: float
    mode: Mode
    phase: Phase
    run_dir: str  # relative to the sweep folder
    requests: int
    offered_rps: float
    achieved_rps: float
    output_tokens_per_s: float
    error_pct: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    # for the table page (an index written before them reads them as NaN)
    itl_p50_ms: float = math.nan
    itl_p99_ms: float = math.nan
    goodput_rps: float = math.nan  # within the run's own SLOs (every ok request: none)
    ttft_p90_ms: float = math.nan
    # each latency's n (`ttft_ms` → requests with a TTFT); a percentile its n does not
    # support is NaN above. None: an index written before it (`requests` stands in)
    latency_n: dict[str, int] | None = None
    saturated: bool = False
    reason: str | None = None
    # a layer sweep (--compare-layer): the point's arms summary and the layer processes'
    # CPU/RSS; the figures above are then the direct arm's, i.e. the engines' own
    layer: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: _json_number(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointSummary:
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {
            k: (math.nan if v is None and k not in ("reason", "layer", "latency_n") else v)
            for k, v in data.items() if k in names
        }
        return cls(**values)

    def n(self, metric: str) -> int:
        """How many observations `metric`'s percentiles stand on."""
        return int((self.latency_n or {}).get(metric, self.requests))

    def ttft(self, stat: str) -> float:
        """The TTFT percentile `stat`, NaN where the point's n does not support it."""
        value = float(getattr(self, f"ttft_{stat}_ms"))
        return value if self.n("ttft_ms") >= needed_n(percentile_fraction(stat)) else math.nan


@dataclass
class AutoSearch:
    """Coarse geometric search for saturation, then `dense` evenly spaced points
    between the last healthy and the first saturated load. Pure state machine:
    `next_load()` proposes, `observe()` records what the run showed."""

    mode: Mode
    start: float
    factor: float = 2.0
    max_load: float = 64.0
    dense: int = 4
    observed: list[PointSummary] = field(default_factory=list)
    _dense_queue: list[float] | None = None

    def __post_init__(self) -> None:
        if not self.start > 0:
            raise ValueError("start must be > 0")
        if not self.factor > 1:
            raise ValueError("factor must be > 1")
        if self.max_load < self.start:
            raise ValueError("max load must be ≥ start")
        if self.dense < 0:
            raise ValueError("dense must be ≥ 0")

    def next_load(self) -> tuple[float, Phase] | None:
        if self._dense_queue is not None:
            return (self._dense_queue.pop(0), "dense") if self._dense_queue else None
        coarse = [p for p in self.observed if p.phase == "coarse"]
        if coarse and coarse[-1].saturated:
            self._dense_queue = self._dense_loads(coarse)
            return self.next_load()
        load = self.start if not coarse else coarse[-1].load * self.factor
        load = self._round(load)
        if coarse and load <= coarse[-1].load:
            load = coarse[-1].load + 1  # users mode: integer steps must move
        if load > self.max_load * (1 + 1e-9):
            return None  # never saturated within the allowed range
        return load, "coarse"

    def observe(self, point: PointSummary) -> None:
        self.observed.append(point)
        if point.phase == "dense" and point.saturated and self._dense_queue is not None:
            self._dense_queue.clear()  # stop early: the rest would be saturated too

    def _dense_loads(self, coarse: list[PointSummary]) -> list[float]:
        high = coarse[-1].load
        low = coarse[-2].load if len(coarse) > 1 else 0.0
        seen = {p.load for p in self.observed}
        step = (high - low) / (self.dense + 1)
        loads = [self._round(low + step * (i + 1)) for i in range(self.dense)]
        return sorted({x for x in loads if low < x < high and x not in seen})

    def _round(self, load: float) -> float:
        if self.mode == "users":
            return float(max(1, round(load)))
        return float(f"{load:.4g}")


def judge_saturation(
    point: PointSummary, earlier: Sequence[PointSummary], rule: SaturationRule
) -> str | None:
    """Why `point` is over-saturated, or None. `earlier` are the points measured
    before it (any order); the lightest healthy one is the latency reference."""
    if point.requests == 0 or not math.isfinite(point.achieved_rps):
        return "no completed request"
    if point.error_pct > rule.max_error_pct:
        return f"errors {point.error_pct:.1f} % > {rule.max_error_pct:g} %"
    if point.mode == "rate" and point.offered_rps > 0:
        ratio = point.achieved_rps / point.offered_rps
        if ratio < rule.min_achieved_ratio:
            return (f"achieved {point.achieved_rps:.3g} req/s is {ratio:.0%} of offered "
                    f"{point.offered_rps:.3g} req/s")
    healthy = sorted((p for p in earlier if not p.saturated), key=lambda p: p.load)
    below = [p for p in healthy if p.load < point.load]
    if point.mode == "users" and below:
        prev = below[-1]
        ideal_gain = point.load / prev.load - 1.0
        gain = point.achieved_rps / prev.achieved_rps - 1.0 if prev.achieved_rps > 0 else 0.0
        if gain < rule.min_scaling_gain * ideal_gain:
            return (f"throughput {point.achieved_rps:.3g} req/s gained {gain:.0%} for "
                    f"{ideal_gain:.0%} more users")
    if healthy:
        return _ttft_growth(point, healthy[0], rule)
    return None


def _ttft_growth(point: PointSummary, lightest: PointSummary, rule: SaturationRule
                 ) -> str | None:
    """TTFT growth over the lightest healthy point, at the highest percentile both
    points' n support; no test at all where none is."""
    stat = next((s for s in JUDGED_TTFT_STATS
                 if math.isfinite(point.ttft(s)) and math.isfinite(lightest.ttft(s))), None)
    if stat is None:
        return None
    value, reference = point.ttft(stat), lightest.ttft(stat)
    if value <= max(rule.ttft_growth * reference, rule.ttft_floor_ms):
        return None
    why = "" if stat == "p99" else (
        f" ({stat}: p99 needs n ≥ {needed_n(0.99)}; this point has {point.n('ttft_ms')}, "
        f"the lightest {lightest.n('ttft_ms')})")
    return (f"{stat} TTFT {value:.0f} ms > {rule.ttft_growth:g}× the lightest point's "
            f"{reference:.0f} ms{why}")


def summarise_point(
    run_dir: Path, sweep_dir: Path, load: float, mode: Mode, phase: Phase,
    arm: str | None = None,
) -> PointSummary:
    """The figures of one finished run, computed by the report's own analysis. Offered
    and achieved load share its measured window: the arrivals (sent or dropped) and the
    ok requests that ended inside it, over the same seconds. With `arm` (a layer sweep:
    `direct`), only that arm's requests, and its share of the arrivals: the engines'
    figures without the hop, which is what judges their saturation."""
    from zerohop.analysis.comparison.arms import arm_views
    from zerohop.analysis.latency.run_summary import summarise_run
    from zerohop.storage.run_reader import load_run

    whole = load_run(run_dir)
    run = arm_views(whole).get(arm, whole) if arm is not None else whole
    share = len(run.requests) / len(whole.requests) if len(whole.requests) else 1.0
    summary = summarise_run(run)  # the run's own SLOs decide its goodput, nothing else
    row = summary.total if summary.total.requests else None
    counters = whole.manifest.get("counters") or {}
    sent = int(counters.get("sent", len(whole.requests)))
    seconds = summary.window.duration_s
    offered = math.nan
    if mode == "rate" and seconds > 0:
        offered = share * (sent + int(counters.get("dropped_arrivals", 0))) / seconds

    def stat(metric: str, name: str) -> float:  # NaN where its n is too small for it
        dist = row.latency.get(metric) if row else None
        if dist is None or dist.n < needed_n(percentile_fraction(name)):
            return math.nan
        return float(dist.get(name))

    return PointSummary(
        load=load, mode=mode, phase=phase,
        run_dir=os.path.relpath(run_dir, sweep_dir),
        requests=row.requests if row else 0,
        offered_rps=offered,
        achieved_rps=row.req_per_s if row else math.nan,
        output_tokens_per_s=row.output_tokens_per_s if row else math.nan,
        error_pct=row.error_pct if row else math.nan,
        ttft_p50_ms=stat("ttft_ms", "p50"), ttft_p99_ms=stat("ttft_ms", "p99"),
        tpot_p50_ms=stat("tpot_ms", "p50"), tpot_p99_ms=stat("tpot_ms", "p99"),
        e2e_p50_ms=stat("e2e_ms", "p50"), e2e_p99_ms=stat("e2e_ms", "p99"),
        itl_p50_ms=stat("itl_ms", "p50"), itl_p99_ms=stat("itl_ms", "p99"),
        goodput_rps=row.goodput_rps if row else math.nan,
        ttft_p90_ms=stat("ttft_ms", "p90"),
        latency_n={metric: int(dist.n) for metric, dist in row.latency.items()} if row else {},
    )


# --- running a sweep ---------------------------------------------------------------------
@dataclass
class SweepPlan:
    base: RunPlan  # rate/users/name/results_dir are set per point
    mode: Mode
    loads: list[float] | None = None  # explicit list; None = automatic
    search: AutoSearch | None = None
    rule: SaturationRule = field(default_factory=SaturationRule)
    max_points: int = 12
    layers: LayerSetup | None = None  # --compare-layer: each point an interleaved run
    layer_pids: dict[str, int] = field(default_factory=dict)  # arm → the layer's pid


@dataclass
class SweepResult:
    sweep_dir: Path
    points: list[PointSummary]
    saturation: dict[str, Any]
    layer_knee: dict[str, Any] | None = None
    early_stop: EarlyStop | None = None  # --stop-when-saturated ended an explicit list


def run_sweep(plan: SweepPlan, runner: Runner | None = None) -> SweepResult:
    """Run every point (explicit list, or the automatic search) and keep `index.json`
    up to date after each, so an interrupted sweep still leaves a readable index."""
    from zerohop.storage import run_folder as results

    runner = runner or (lambda p: run_once(p, announce=False))
    sweep_dir = results.new_run_dir(plan.base.results_dir, f"sweep-{plan.base.name}")
    processes: list[Any] = []
    try:
        if plan.layers is not None:
            plan = dataclasses.replace(plan, base=_layer_base(plan, processes))
        points, stop = _run_points(plan, runner, sweep_dir)
    finally:
        for process in reversed(processes):
            process.stop()
    write_index(sweep_dir, plan, points, finished=True)
    knee = layer_knee_of(points) if plan.layers is not None else None
    return SweepResult(sweep_dir, points, saturation_summary(points), knee, stop)


def _layer_base(plan: SweepPlan, processes: list[Any]) -> RunPlan:
    """The base plan of a layer sweep: every point one interleaved run, its requests
    at random direct or through each layer (and the zero-cost control, started here
    once for the whole sweep)."""
    assert plan.layers is not None
    direct, arms = start_targets(plan.base, plan.layers, processes)
    return dataclasses.replace(plan.base, host=direct, arm_hosts={"direct": direct, **arms})


def _run_points(plan: SweepPlan, runner: Runner, sweep_dir: Path
                ) -> tuple[list[PointSummary], EarlyStop | None]:
    points: list[PointSummary] = []
    queue: list[float] = sorted(plan.loads) if plan.loads else []
    while len(points) < plan.max_points:
        step = _next_step(plan, queue)
        if step is None:
            break
        load, phase = step
        label = f"{plan.base.name}-{'rate' if plan.mode == 'rate' else 'users'}{load:g}"
        point_plan = dataclasses.replace(
            plan.base, name=label, results_dir=sweep_dir,
            rate=load if plan.mode == "rate" else None,
            users=int(load) if plan.mode == "users" else plan.base.users,
            report=plan.base.report,
        )
        click.echo(f"zerohop sweep: point {len(points) + 1} · {plan.mode} {load:g} ({phase})")
        with LayerProcessWatch(plan.layer_pids) as watch:
            result = runner(point_plan)
        arm = "direct" if plan.layers is not None else None
        point = summarise_point(result.run_dir, sweep_dir, load, plan.mode, phase, arm)
        if plan.layers is not None:
            point = dataclasses.replace(point, layer=layer_point(result.run_dir, watch))
        block = point_saturation(result.run_dir) if plan.base.stop_when_saturated else None
        # the live verdict first: a stopped point's cancelled requests read as errors
        reason = verdict_reason(block) or judge_saturation(point, points, plan.rule)
        point = dataclasses.replace(point, saturated=reason is not None, reason=reason)
        points.append(point)
        if plan.search is not None:
            plan.search.observe(point)
        click.echo(f"  {'direct arm: ' if point.layer is not None else ''}achieved "
                   f"{point.achieved_rps:.3g} req/s · TTFT p99 {p99_text(point)} · "
                   f"{'SATURATED: ' + reason if reason else 'ok'}")
        if point.layer is not None:
            echo_layer_point(point.layer)
        write_index(sweep_dir, plan, points)
        if plan.loads and block is not None and reason is not None:
            stop = early_stop(load, block, list(queue), plan.base.duration_s)
            click.echo(stop.line(plan.mode))
            return points, stop
    return points, None


def p99_text(point: PointSummary) -> str:
    """The point's p99 TTFT as the console prints it: a dash, with its n, where the
    point has fewer requests than a p99 needs."""
    if math.isfinite(point.ttft("p99")):
        return f"{point.ttft_p99_ms:.4g} ms"
    return f"— (n {point.n('ttft_ms')} < {needed_n(0.99)})"


def layer_knee_of(points: Sequence[PointSummary]) -> dict[str, Any]:
    """The layers' knees over the sweep's points (`analysis.layer_knee`); the engines'
    saturation at each is the direct arm's own judgement."""
    from zerohop.analysis.comparison.layer_knee import layer_knees

    rows = [{"load": p.load, "arms": (p.layer or {}).get("arms"),
             "processes": (p.layer or {}).get("processes"),
             "engines_saturated": p.saturated}
            for p in sorted(points, key=lambda p: p.load) if p.layer is not None]
    return layer_knees(rows)


def _next_step(plan: SweepPlan, queue: list[float]) -> tuple[float, Phase] | None:
    if plan.search is not None:
        return plan.search.next_load()
    return (queue.pop(0), "explicit") if queue else None


def saturation_summary(points: Sequence[PointSummary]) -> dict[str, Any]:
    """The highest healthy load below the first saturated one (by load order)."""
    ordered = sorted(points, key=lambda p: p.load)
    first_bad = next((p for p in ordered if p.saturated), None)
    healthy = [p for p in ordered if not p.saturated
               and (first_bad is None or p.load < first_bad.load)]
    return {
        "found": first_bad is not None,
        "last_unsaturated_load": healthy[-1].load if healthy else None,
        "first_saturated_load": first_bad.load if first_bad else None,
        "reason": first_bad.reason if first_bad else None,
        "max_achieved_rps": _json_number(max((p.achieved_rps for p in points), default=math.nan)),
    }


def write_index(
    sweep_dir: Path, plan: SweepPlan, points: Sequence[PointSummary], *, finished: bool = False
) -> Path:
    base = plan.base
    saturation = saturation_summary(points)
    knee = layer_knee_of(points) if plan.layers is not None else None
    index: dict[str, Any] = {
        "schema": INDEX_SCHEMA,
        "schema_version": INDEX_SCHEMA_VERSION,
        "name": base.name,
        "mode": plan.mode,
        "status": "completed" if finished else "running",
        "updated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": {"url": base.host or "embedded", "api": base.api,
                   "sim_args": base.sim_args if base.host is None else []},
        "workloads": [str(p) for p in base.workloads],
        "classes": base.classes,
        "duration_s": base.duration_s,
        "seed": base.seed,
        "search": None if plan.search is None else {
            "start": plan.search.start, "factor": plan.search.factor,
            "max_load": plan.search.max_load, "dense": plan.search.dense},
        "rule": dataclasses.asdict(plan.rule),
        "points": [p.to_json() for p in points],
        "saturation": saturation,
    }
    if plan.layers is not None:
        index["layers"] = {"urls": plan.layers.layer_urls, "control": plan.layers.control,
                           "pids": plan.layer_pids}
        index["layer_knee"] = knee
    # the target's options may hold a key (`--sim-args "--api-key …"`), as the manifest's do
    path = _write_json(sweep_dir / INDEX_FILE, redact(index, known_secrets()))
    write_sweep_page(sweep_dir, base.name, plan.mode, points, saturation,  # beside its data
                     finished=finished, layer_knee=knee)
    return path


def read_index(sweep_dir: Path) -> dict[str, Any]:
    """The index with `points` as `PointSummary` objects. ValueError names the problem."""
    path = Path(sweep_dir) / INDEX_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no sweep index (run `zerohop sweep` first)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: unreadable sweep index: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != INDEX_SCHEMA:
        raise ValueError(f"{path}: schema is not {INDEX_SCHEMA!r}")
    data["points"] = [PointSummary.from_json(p) for p in data.get("points") or []]
    return data


def _write_json(path: Path, data: Any) -> Path:
    return write_text_atomically(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
