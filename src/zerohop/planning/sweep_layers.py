"""A layer sweep's point (`zerohop sweep --compare-layer`): the arms summary of its
interleaved run and each layer process's CPU and RSS over its load window, and the
console lines that print them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from zerohop.core.atomic_file import write_text_atomically
from zerohop.planning.layer_process import LayerProcessWatch
from zerohop.runner.compare_layer import arms_summary

ARMS_FILE = "arms.json"  # a layer sweep point's arms summary, in its folder


def layer_point(run_dir: Path, watch: LayerProcessWatch) -> dict[str, Any]:
    """One layer-sweep point: its arms summary (also written as `arms.json` in its
    folder, the summary `zerohop run --compare-layer` writes) and each watched layer
    process's CPU and RSS over the run's load window."""
    from zerohop.analysis.comparison.layer_knee import process_figures
    from zerohop.analysis.measured_window import measured_window
    from zerohop.storage.jsonl import without_nan
    from zerohop.storage.run_reader import load_run

    run = load_run(run_dir)
    made = arms_summary(run)
    summary = without_nan(made[1]) if made is not None else None
    if summary is not None:
        text = json.dumps(summary, indent=2, allow_nan=False) + "\n"
        write_text_atomically(run_dir / ARMS_FILE, text)
    window = measured_window(run)
    start, end = window.start_ts, window.end_ts
    if not math.isfinite(start):  # no timestamps: the whole sampled span
        start, end = -math.inf, math.inf
    processes = {arm: {"pid": pid, **process_figures(watch.rows(arm), start, end)}
                 for arm, pid in watch.pids.items()}
    return {"arms": summary, "processes": processes}


def echo_layer_point(layer: dict[str, Any]) -> None:
    """One console line per layer: its TTFT cost at p50 and p99, its CPU and RSS."""
    costs = (layer.get("arms") or {}).get("costs") or {}
    for arm, cost in costs.items():
        ttft = cost.get("layer_cost_ms", {}).get("ttft_ms", {})
        cells = " · ".join(f"{stat} {ttft[stat]:+.2f} ms" for stat in ("p50", "p99")
                           if isinstance(ttft.get(stat), int | float))
        process = (layer.get("processes") or {}).get(arm)
        cpu = ""
        if process and process.get("cpu_pct_mean") is not None:
            cpu = (f" · CPU {process['cpu_pct_mean']:.1f} % of a core, RSS "
                   f"{(process.get('rss_bytes_max') or 0) / 2**20:.1f} MiB")
        click.echo(f"  {arm}: TTFT cost {cells or 'none'}{cpu}")
