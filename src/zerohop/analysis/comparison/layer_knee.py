"""The layer's knee: the offered rate at which a hop's added latency starts to grow.

A layer sweep (`zerohop sweep --compare-layer`) prices the hop at each offered rate in
one interleaved run (`analysis.arms`): per layer and rate, its cost at p50 and p99 with
a 95 % interval. The knee, per percentile, is the lowest rate whose cost exceeds the
lowest rate's by more than `KNEE_GROWTH_MS` (fixed in advance, not fitted to the data)
*and* whose interval's lower bound lies above the lowest rate's upper bound: a growth
the intervals cannot tell from noise is not called a knee. Beside it: the layer
process's CPU and RSS at that rate (sampled by pid over the point's load window) and
whether the engines were saturated there (the direct arm's own judgement), so a knee
the engines caused is not read as the layer's limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from zerohop.analysis.comparison.arms import BASE_ARM
from zerohop.core.metrics import needed_n, percentile_fraction

KNEE_GROWTH_MS = 5.0  # cost growth over the lowest rate's that marks the knee (ms)
KNEE_METRIC = "ttft_ms"  # the hop's cost is paid before the first token
KNEE_STATS = ("p50", "p99")


@dataclass(frozen=True)
class CostAt:
    """One layer's cost at one percentile and rate, with its 95 % interval (ms)."""

    rate: float
    cost_ms: float
    ci_low_ms: float
    ci_high_ms: float


@dataclass(frozen=True)
class Knee:
    """Where (and whether) one percentile's cost starts to grow."""

    stat: str
    rate: float | None  # None: no knee within the rates tried
    base_rate: float | None
    base_cost_ms: float | None
    cost_ms: float | None
    growth_ms: float | None
    threshold_ms: float

    def describe(self, unit: str = "req/s") -> str:
        if self.rate is None or self.growth_ms is None:
            return f"{self.stat}: no knee within the rates tried"
        return (f"{self.stat}: knee at {self.rate:g} {unit} (cost {self.cost_ms:+.2f} ms, "
                f"{self.growth_ms:+.2f} ms over {self.base_rate:g} {unit}'s, threshold "
                f"{self.threshold_ms:g} ms)")


def find_knee(costs: Sequence[CostAt], stat: str,
              threshold_ms: float = KNEE_GROWTH_MS) -> Knee:
    """The lowest rate whose cost exceeds the lowest rate's by more than `threshold_ms`
    and whose interval lies wholly above the lowest rate's (pure)."""
    usable = sorted((c for c in costs if _finite(c.cost_ms)), key=lambda c: c.rate)
    if not usable:
        return Knee(stat, None, None, None, None, None, threshold_ms)
    base = usable[0]
    for point in usable[1:]:
        growth = point.cost_ms - base.cost_ms
        separated = (_finite(point.ci_low_ms) and _finite(base.ci_high_ms)
                     and point.ci_low_ms > base.ci_high_ms)
        if growth > threshold_ms and separated:
            return Knee(stat, point.rate, base.rate, base.cost_ms, point.cost_ms, growth,
                        threshold_ms)
    return Knee(stat, None, base.rate, base.cost_ms, None, None, threshold_ms)


def costs_of(points: Sequence[Mapping[str, Any]], arm: str, stat: str,
             metric: str = KNEE_METRIC) -> list[CostAt]:
    """One arm's cost per rate from the sweep's points (`{"load": rate, "arms": the
    point's arms summary}`), at one percentile; a rate where the arm or direct has too
    few ok requests for that percentile (`core.metrics.needed_n`: p99 needs 100) is
    left out, so a p99 of a few dozen requests never sets or bases a knee."""
    need = needed_n(percentile_fraction(stat))
    out = []
    for point in points:
        summary = point.get("arms") or {}
        if min(_ok(summary, arm), _ok(summary, BASE_ARM)) < need:
            continue
        cost = (summary.get("costs") or {}).get(arm) or {}
        value = cost.get("layer_cost_ms", {}).get(metric, {}).get(stat)
        low, high = (cost.get("ci95_ms", {}).get(metric, {}).get(stat) or (None, None))
        if value is None:
            continue
        out.append(CostAt(float(point["load"]), float(value), _num(low), _num(high)))
    return out


def process_figures(samples: Sequence[tuple[float, str, float]], start_ts: float,
                    end_ts: float) -> dict[str, Any]:
    """A process's CPU (% of one core: mean and max) and RSS (bytes: max) from the
    sampler's (ts, metric, value) rows inside `[start_ts, end_ts]` (the load window)."""
    inside = [(metric, value) for ts, metric, value in samples
              if start_ts <= ts <= end_ts and _finite(value)]
    cpu = [v for m, v in inside if m.endswith("cpu_pct")]
    rss = [v for m, v in inside if m.endswith("rss_bytes")]
    return {"cpu_pct_mean": round(sum(cpu) / len(cpu), 2) if cpu else None,
            "cpu_pct_max": round(max(cpu), 2) if cpu else None,
            "rss_bytes_max": int(max(rss)) if rss else None,
            "samples": len(cpu)}


def layer_knees(points: Sequence[Mapping[str, Any]],
                threshold_ms: float = KNEE_GROWTH_MS) -> dict[str, Any]:
    """Per layer arm of the sweep: its knee at p50 and p99, the layer's CPU and RSS and
    the engines' saturation at each knee. `points`: per rate, `load`, `arms` (the arms
    summary), `processes` ({arm: process_figures}) and `engines_saturated`."""
    arms: list[str] = []
    for point in points:
        summary = point.get("arms") or {}
        control = summary.get("control")
        arms += [a for a in summary.get("costs") or {} if a != control and a not in arms]
    by_rate = {float(p["load"]): p for p in points}
    layers = {}
    for arm in arms:
        knees = {}
        for stat in KNEE_STATS:
            knee = find_knee(costs_of(points, arm, stat), stat, threshold_ms)
            at = by_rate.get(knee.rate) if knee.rate is not None else None
            share = arm_share(at.get("arms") or {}, arm) if at else None
            knees[stat] = {
                **asdict(knee), "text": knee.describe(),
                # the rate the layer itself carried there: its arm's share of the offered
                "layer_rps": (round(knee.rate * share, 4)
                              if knee.rate is not None and share is not None else None),
                "process": ((at.get("processes") or {}).get(arm)) if at else None,
                "engines_saturated": bool(at.get("engines_saturated")) if at else None,
            }
        layers[arm] = knees
    return {"metric": KNEE_METRIC, "threshold_ms": threshold_ms, "layers": layers}


def arm_share(summary: Mapping[str, Any], arm: str) -> float | None:
    """The share of the run's requests sent through `arm` (the arms are chosen at
    random per request, so it is also its share of the offered rate); None unknown."""
    figures = summary.get("arms") or {}
    counts: dict[str, float] = {
        str(name): float(f["requests"]) for name, f in figures.items()
        if isinstance(f, Mapping) and isinstance(f.get("requests"), int | float)}
    total = sum(counts.values())
    if arm not in counts or not total:
        return None
    return counts[arm] / total


def _ok(summary: Mapping[str, Any], arm: str) -> int:
    figures = (summary.get("arms") or {}).get(arm)
    ok = figures.get("ok") if isinstance(figures, Mapping) else None
    return int(ok) if isinstance(ok, int | float) else 0


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
