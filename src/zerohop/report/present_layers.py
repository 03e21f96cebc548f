"""An interleaved layer comparison's summary (the dict `zerohop run --compare-layer`
prints and writes as `compare-<run>-arms.json`) → the arms page's "Layers" section:
the answer first, each arm's cost per percentile with its interval (and net of the
zero-cost control), which replica served each arm, the stream's shape through it, and
what is estimated. Every figure arrives computed; this only turns it into text."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zerohop.report import formatting as fmt
from zerohop.report.present_latency import METRIC_TITLES

COST_STATS: tuple[str, ...] = ("p50", "p90", "p99")
ESTIMATED = (
    "Estimated: each cost is the difference of one percentile between two independent "
    "random subsets of one run (the arm's requests and the base arm's), its 95 % interval "
    "a bootstrap of each side; with few requests in an arm the p99 rests on a handful of "
    "them and its interval is wide. Counted, not estimated: requests, ok, the replica "
    "that served each request (as it named itself in x-zerohop-replica) and the layer's "
    "routes. The stream verdict compares the arm's tokens per read, same-read gaps and "
    "first-token shift with the direct requests of the same run, against fixed thresholds."
)


def layers_section(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The section's context: `answer` (lines), `cost_rows`, `net_rows`, `control`
    (the control's check, or None), `arms` (figures and replica shares), `stream`,
    `estimated`."""
    costs: Mapping[str, Any] = summary.get("costs") or {}
    net: Mapping[str, Any] = summary.get("net_of_control") or {}
    figures: Mapping[str, Any] = summary.get("arms") or {}
    shapes: Mapping[str, Any] = summary.get("stream") or {}
    control = summary.get("control")
    return {
        "answer": _answer(costs, net, control),
        "stats": list(COST_STATS),
        "cost_rows": _cost_rows(costs),
        "net_rows": _cost_rows(net),
        "control": _control_check(control, costs.get(control)) if control else None,
        "arms": [_arm_row(arm, f) for arm, f in figures.items()],
        "stream": [{"arm": arm, "changed": bool(s.get("changed")), "verdict": stream_verdict(s)}
                   for arm, s in shapes.items()],
        "estimated": ESTIMATED,
    }


def cost_cell(cost: Mapping[str, Any], metric: str, stat: str) -> str:
    """`+0.32 ms [−0.30, +1.18]`, or `—` where the run had no such figure."""
    value = cost.get("layer_cost_ms", {}).get(metric, {}).get(stat)
    if value is None:
        return fmt.DASH
    low, high = cost.get("ci95_ms", {}).get(metric, {}).get(stat, (None, None))
    return f"{fmt.signed_ms(value)} ms {fmt.interval(low, high)}"


def stream_verdict(shape: Mapping[str, Any]) -> str:
    """`CHANGED: tokens per read 1.00 → 8.00; …` or `unchanged (1.00 tokens per read,
    direct 1.00)`: what the console and the page say of one arm's stream."""
    if shape.get("changed"):
        return "CHANGED: " + "; ".join(str(r) for r in shape.get("reasons", ()))
    return (f"unchanged ({_tokens(shape.get('tokens_per_read'))} tokens per read, direct "
            f"{_tokens(shape.get('direct_tokens_per_read'))})")


def _answer(costs: Mapping[str, Any], net: Mapping[str, Any], control: str | None
            ) -> list[str]:
    """One line per arm under test: its cost at p50 and p99 on the first metric (TTFT),
    and net of the control where there is one."""
    lines = []
    for arm, cost in costs.items():
        if arm == control:
            continue
        metric = next(iter(cost.get("layer_cost_ms", {})), None)
        if metric is None:
            lines.append(f"{arm}: no cost (no request of both arms finished)")
            continue
        title = METRIC_TITLES.get(metric, metric)
        line = (f"{arm} adds {title} p50 {cost_cell(cost, metric, 'p50')}, "
                f"p99 {cost_cell(cost, metric, 'p99')} over direct")
        if arm in net:
            line += (f"; net of the control p50 {cost_cell(net[arm], metric, 'p50')}, "
                     f"p99 {cost_cell(net[arm], metric, 'p99')}")
        lines.append(line)
    return lines


def _cost_rows(costs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"arm": arm, "metric": METRIC_TITLES.get(metric, metric),
             "cells": [cost_cell(cost, metric, stat) for stat in COST_STATS]}
            for arm, cost in costs.items() for metric in cost.get("layer_cost_ms", {})]


def _control_check(arm: str, cost: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The control does no work, so its cost against direct should hold 0 in its
    interval: which percentiles do, and which do not (there the bare loopback hop costs
    something measurable, which the net figures take out)."""
    if cost is None:
        return None
    holds, misses = [], []
    for metric, stats in cost.get("ci95_ms", {}).items():
        for stat in COST_STATS:
            if stat not in stats:
                continue
            low, high = stats[stat]
            label = f"{METRIC_TITLES.get(metric, metric)} {stat}"
            if _finite(low) and _finite(high) and low <= 0 <= high:
                holds.append(label)
            else:
                misses.append(f"{label} {cost_cell(cost, metric, stat)}")
    return {"arm": arm, "holds": ", ".join(holds) or "none", "misses": "; ".join(misses),
            "ok": not misses}


def _arm_row(arm: str, f: Mapping[str, Any]) -> dict[str, Any]:
    replicas: Mapping[str, int] = f.get("replicas") or {}
    served = sum(replicas.values())
    hit = f.get("cache_hit_pct")
    return {
        "arm": arm,
        "requests": fmt.count(f.get("requests")),
        "ok": fmt.count(f.get("ok")),
        "cache_hit": "unknown" if hit is None else fmt.pct(hit),
        "good": fmt.pct(f.get("good_pct")),
        "goodput": fmt.rate(f.get("goodput_rps")),
        "routes": ", ".join(f"{name}: {n}" for name, n in (f.get("routes") or {}).items()),
        "replicas": [{"name": name, "requests": fmt.count(n),
                      "share": round(n / served, 4) if served else 0.0,
                      "share_text": fmt.pct(100.0 * n / served if served else math.nan)}
                     for name, n in replicas.items()],
    }


def _tokens(value: Any) -> str:
    return f"{value:.2f}" if _finite(value) else fmt.DASH


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
