"""One run, several arms: what a layer costs when every arm met the same server.

An interleaved comparison (`zerohop run --compare-layer`) sends each request at random
to one arm — `direct` to the engine, `layer` through the hop, or one arm per routing
policy — within one run, so whatever the server drifts through falls on every arm
alike. Here the run's records are split by their `arm`, and each arm is compared with
the base arm by the comparison's own machinery (`compare.compare_runs`: per-percentile
deltas, each side bootstrapped on its own — the arms are independent random subsets
of one run): the layer's cost per percentile, with its confidence interval.

The same split by time — the first half of a run against its second — is the noise
floor of a sequential comparison: when a run differs from itself by more than the
cost two runs are said to differ by, that cost is the server's drift, not the layer's.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zerohop.analysis.comparison.compare import (
    CompareSettings,
    Comparison,
    LayerBudget,
    compare_runs,
)
from zerohop.analysis.latency.slo import good_mask, parse_slos
from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.measured_window import measured_window
from zerohop.analysis.run_data import ItlColumn, RunData
from zerohop.analysis.server_timing import server_timing_desc
from zerohop.analysis.timeseries import request_start_ts

BASE_ARM = "direct"


@dataclass(frozen=True)
class ArmFigures:
    """What one arm's requests got: volume, the prefix cache, goodput, routes."""

    arm: str
    requests: int
    ok: int
    cache_hit_pct: float | None  # cached / prompt tokens where the server said; None: unknown
    cache_known: int  # ok requests whose usage said how many tokens were cached
    good_pct: float  # requests that were ok and met every --slo objective
    goodput_rps: float
    routes: dict[str, int]  # the upstream the layer chose (Server-Timing `route`), counted
    replicas: dict[str, int]  # the replica that answered, as it named itself, counted


def arms_of(run: RunData) -> list[str]:
    """The arms the run's records carry: the base arm first, then in the order the
    manifest names them (`target.arms`), then by first appearance."""
    seen = [str(a) for a in dict.fromkeys(run.requests["arm"].dropna().tolist())]
    target = run.manifest.get("target")
    listed = target.get("arms") if isinstance(target, dict) else None
    named = [str(a.get("arm")) for a in listed if isinstance(a, dict)] \
        if isinstance(listed, list) else []
    return sorted(seen, key=lambda a: (a != BASE_ARM, a not in named,
                                       named.index(a) if a in named else seen.index(a)))


def subset(run: RunData, mask: np.ndarray, label: str,
           manifest_changes: dict[str, Any] | None = None) -> RunData:
    """The run restricted to the requests `mask` selects (a view for the comparison:
    same manifest, with `manifest_changes` merged into it)."""
    mask = np.asarray(mask, dtype=bool)
    frame = run.requests[mask].reset_index(drop=True)
    for name in frame.columns:
        if isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].cat.remove_unused_categories()
    lengths = run.itl.lengths[mask]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    manifest = copy.deepcopy(run.manifest)
    for key, value in (manifest_changes or {}).items():
        if isinstance(value, dict) and isinstance(manifest.get(key), dict):
            manifest[key] = {**manifest[key], **value}
        else:
            manifest[key] = value
    manifest["run_id"] = label
    return RunData(run_dir=run.run_dir, manifest=manifest, requests=frame,
                   itl=ItlColumn(run.itl.pooled(mask), offsets), telemetry=run.telemetry,
                   microbench=None, requests_source=run.requests_source)


def arm_views(run: RunData) -> dict[str, RunData]:
    """One view per arm, labelled `<run> · <arm>`; the non-base arms are marked as the
    layer side of a layer comparison (manifest target kind `layer`)."""
    arms = run.requests["arm"].astype(object).to_numpy()
    views = {}
    for arm in arms_of(run):
        kind = {"kind": "layer", "arm": arm} if arm != BASE_ARM else {"arm": arm}
        views[arm] = subset(run, arms == arm, f"{run.label} · {arm}", {"target": kind})
    return views


def arm_comparisons(run: RunData, settings: CompareSettings | None = None,
                    base_arm: str = BASE_ARM) -> dict[str, Comparison]:
    """Each arm against the base arm (`direct`; or another, e.g. the zero-cost
    control, to price a layer net of the bare hop), as a layer comparison: arm →
    result. With another base, `direct` is left out."""
    views = arm_views(run)
    if base_arm not in views:
        raise ValueError(f"the run has no {base_arm!r} arm to compare with "
                         f"(arms: {', '.join(views) or 'none'})")
    base = views.pop(base_arm)
    views.pop(BASE_ARM, None)
    return {arm: compare_runs(base, view, settings, layer=True) for arm, view in views.items()}


def half_views(run: RunData) -> tuple[RunData, RunData]:
    """The run's first and second half by when requests started (each half's load
    duration halved, so its rates stay rates)."""
    start = request_start_ts(run.requests)
    finite = start[np.isfinite(start)]
    middle = float(np.median(finite)) if finite.size else math.nan
    first = np.isfinite(start) & (start <= middle)
    second = np.isfinite(start) & (start > middle)
    load = dict(run.manifest.get("load") or {})
    if isinstance(load.get("duration_s"), int | float):
        load["duration_s"] = load["duration_s"] / 2.0
    return (subset(run, first, f"{run.label} · first half", {"load": load}),
            subset(run, second, f"{run.label} · second half", {"load": load}))


def noise_floor(run: RunData, settings: CompareSettings | None = None) -> Comparison:
    """The run against itself: its second half minus its first, as a layer budget
    (what a drift alone would make a sequential comparison report)."""
    first, second = half_views(run)
    return compare_runs(first, second, settings, layer=True)


def chosen_budget(comparison: Comparison) -> LayerBudget | None:
    """The budget over all workloads (or the only one)."""
    budgets = comparison.layer_budgets
    return next((b for b in budgets if b.workload == ALL_WORKLOADS),
                budgets[0] if budgets else None)


def budget_dict(comparison: Comparison) -> dict[str, Any]:
    """A comparison's layer budget as JSON: cost, its 95% CI, both sides, per metric
    and percentile (ms)."""
    chosen = chosen_budget(comparison)
    out: dict[str, Any] = {"workload": chosen.workload if chosen else None,
                           "layer_cost_ms": {}, "ci95_ms": {}, "direct_ms": {},
                           "layered_ms": {}}
    for row in chosen.rows if chosen is not None else []:
        out["layer_cost_ms"].setdefault(row.metric, {})[row.stat] = _round(row.layer_ms)
        out["ci95_ms"].setdefault(row.metric, {})[row.stat] = [_round(row.ci_low),
                                                               _round(row.ci_high)]
        out["direct_ms"].setdefault(row.metric, {})[row.stat] = _round(row.direct_ms)
        out["layered_ms"].setdefault(row.metric, {})[row.stat] = _round(row.layered_ms)
    return out


def noise_verdict(cost: dict[str, Any], noises: list[dict[str, Any]]) -> dict[str, Any]:
    """Per metric and percentile: the largest half-vs-half difference of the runs
    (`noise_ms`) and whether it is at least the cost the runs are said to differ by
    (`noise_exceeds_cost`: the cost cannot be told from the runs' own drift)."""
    noise_ms: dict[str, dict[str, float]] = {}
    exceeds: dict[str, dict[str, bool]] = {}
    for metric, stats in cost["layer_cost_ms"].items():
        for stat, value in stats.items():
            deltas = [abs(n["layer_cost_ms"].get(metric, {}).get(stat, math.nan))
                      for n in noises]
            deltas = [d for d in deltas if math.isfinite(d)]
            if not deltas or value is None or not math.isfinite(value):
                continue
            noise_ms.setdefault(metric, {})[stat] = _round(max(deltas))
            exceeds.setdefault(metric, {})[stat] = max(deltas) >= abs(value)
    return {"noise_ms": noise_ms, "noise_exceeds_cost": exceeds}


def arm_figures(view: RunData, arm: str) -> ArmFigures:
    """One arm's volume, prefix-cache hit rate, goodput (under the run's --slo) and
    the routes its requests took."""
    frame = view.requests
    ok = (frame["outcome"] == "ok").to_numpy()
    cached = frame["cached_tokens"].to_numpy(dtype=float)
    prompt = frame["input_tokens"].to_numpy(dtype=float)
    known = ok & np.isfinite(cached) & np.isfinite(prompt) & (prompt > 0)
    hit = (100.0 * cached[known].sum() / prompt[known].sum()) if known.any() else None
    targets, _notes = parse_slos(view.manifest.get("slo"))
    good = good_mask(frame, view.itl, targets)
    window = measured_window(view)
    rps = window.rate(float((good & window.counts(frame)).sum()))
    return ArmFigures(
        arm=arm, requests=len(frame), ok=int(ok.sum()),
        cache_hit_pct=None if hit is None else round(float(hit), 2),
        cache_known=int(known.sum()),
        good_pct=round(100.0 * float(good.sum()) / len(frame), 2) if len(frame) else math.nan,
        goodput_rps=round(rps, 3), routes=_routes(frame), replicas=_replicas(frame),
    )


def _routes(frame: pd.DataFrame) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in frame["server_timing"].dropna():
        route = server_timing_desc(str(value), "route")
        if route:
            counts[route] = counts.get(route, 0) + 1
    return dict(sorted(counts.items()))


def _replicas(frame: pd.DataFrame) -> dict[str, int]:
    if "replica" not in frame.columns:
        return {}
    counts = frame["replica"].dropna().astype(str).value_counts()
    return {str(name): int(n) for name, n in sorted(counts.items())}


def _round(value: float) -> float:
    return round(float(value), 3)
