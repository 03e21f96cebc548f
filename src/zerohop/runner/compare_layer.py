"""The same workload direct and through one extra hop, and what the hop costs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import run_once


def run_compare_layer(plan: RunPlan, layer_url: str | None, layer_args: list[str]) -> int:
    """The same workload direct and through one extra hop; the comparison page prices it."""
    from zerohop.report.build import compare_dirs, write_comparison

    sim = None
    proxy = None
    host = plan.host
    try:
        if host is None:
            from zerohop.sim.embedded import start_embedded_target

            sim = start_embedded_target(plan.sim_args)
            host = sim.url
        if layer_url is None:
            from zerohop.sim.launcher import start_proxy

            proxy = start_proxy(host, layer_args)
            layer_url = proxy.url
        direct_plan = dataclasses.replace(plan, host=host, name=plan.name + "-direct")
        layer_plan = dataclasses.replace(plan, host=layer_url, name=plan.name + "-layer")
        direct = run_once(direct_plan, kind="embedded")
        layered = run_once(layer_plan, kind="layer")
    finally:
        if proxy is not None:
            proxy.stop()
        if sim is not None:
            sim.stop()
    stem = layered.run_dir.parent / f"compare-{direct.run_dir.name}-vs-layer"
    comparisons = compare_dirs([direct.run_dir, layered.run_dir], layer_of=direct.run_dir)
    write_comparison(comparisons, stem.with_suffix(".html"))
    budget = layer_cost(comparisons)
    stem.with_suffix(".json").write_text(json.dumps(budget, indent=2) + "\n")
    click.echo("layer cost (through the layer − direct, ms; 95% CI):")
    for metric, stats in budget["layer_cost_ms"].items():
        cells = "  ".join(f"{k} {v:+.2f}" for k, v in stats.items())
        click.echo(f"  {metric:<8} {cells}")
    click.echo(f"comparison: {stem.with_suffix('.html')}")
    return max(direct.exit_code, layered.exit_code)


def layer_cost(comparisons: list[Any]) -> dict[str, Any]:
    """The report's layer budget over all workloads (or the only one), per metric."""
    budgets = [b for c in comparisons for b in c.layer_budgets]
    chosen = next((b for b in budgets if b.workload == "all"), budgets[0] if budgets else None)
    cost: dict[str, dict[str, float]] = {}
    ci: dict[str, dict[str, list[float]]] = {}
    for row in chosen.rows if chosen is not None else []:
        cost.setdefault(row.metric, {})[row.stat] = round(row.layer_ms, 3)
        ci.setdefault(row.metric, {})[row.stat] = [round(row.ci_low, 3), round(row.ci_high, 3)]
    return {"workload": chosen.workload if chosen else None, "layer_cost_ms": cost, "ci95_ms": ci}
