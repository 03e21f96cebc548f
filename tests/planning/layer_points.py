"""Synthetic points of a layer sweep (`zerohop sweep --compare-layer`): each a
`PointSummary` whose `layer` holds an arms summary shaped as `arms_summary` writes it
(costs with intervals, each arm's figures with the replicas that served it) and the
layer process's CPU and RSS. The cost is flat, then grows past `knee_at`."""

from __future__ import annotations

from typing import Any

from zerohop.planning.sweep import PointSummary


def layer_point(load: float, arm: str, *, knee_at: float, replicas: tuple[str, ...],
                saturated: bool = False) -> PointSummary:
    rise = 20.0 if load >= knee_at else 0.0
    p50, p99 = 1.0 + rise, 3.0 + 2 * rise
    cost: dict[str, Any] = {
        "layer_cost_ms": {"ttft_ms": {"p50": p50, "p90": p50 + 1, "p99": p99}},
        "ci95_ms": {"ttft_ms": {"p50": [p50 - 0.5, p50 + 0.5], "p90": [p50, p50 + 2],
                                "p99": [p99 - 1, p99 + 1]}},
    }
    figures = {name: {"requests": 100, "ok": 100, "routes": {},
                      "replicas": {r: 50 for r in replicas} if name != "direct" else
                      {replicas[0]: 100}}
               for name in ("direct", arm)}
    return PointSummary(
        load=load, mode="rate", phase="explicit", run_dir=f"run-{load:g}", requests=100,
        offered_rps=load / 2, achieved_rps=load / 2, output_tokens_per_s=10.0,
        error_pct=0.0, ttft_p50_ms=10.0, ttft_p99_ms=20.0, tpot_p50_ms=5.0,
        tpot_p99_ms=6.0, e2e_p50_ms=50.0, e2e_p99_ms=60.0, saturated=saturated,
        reason="errors 9.0 % > 5 %" if saturated else None,
        layer={"arms": {"control": None, "costs": {arm: cost}, "arms": figures},
               "processes": {arm: {"pid": 1, "cpu_pct_mean": 2.0 * load,
                                   "cpu_pct_max": 3.0 * load, "rss_bytes_max": 50 * 2**20,
                                   "samples": 10}}},
    )


def layer_points(arm: str = "router", *, knee_at: float = 40.0,
                 replicas: tuple[str, ...] = ("r0", "r1")) -> list[PointSummary]:
    return [layer_point(rate, arm, knee_at=knee_at, replicas=replicas, saturated=rate >= 80)
            for rate in (10.0, 20.0, 40.0, 80.0)]
