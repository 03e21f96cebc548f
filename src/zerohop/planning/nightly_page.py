"""The nightly's pages: `nightly-<id>.html` and `latest.html` (the verdict, the gates
and the trend of each metric over the history), and the pooled comparison page.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zerohop.planning.nightly_gates import GateRow


def write_nightly_page(history_dir: Path, history: Sequence[dict[str, Any]],
                       entry: dict[str, Any], gates: Sequence[GateRow],
                       baseline: dict[str, Any] | None) -> Path:
    """`nightly-<id>.html` (and a copy as `latest.html`): verdict, gates, trends."""
    from zerohop.report.render import render_page, write_atomically

    context, charts = nightly_page(history, entry, gates, baseline)
    html = render_page("nightly.html.j2", context, charts)
    page = write_atomically(Path(history_dir) / f"nightly-{entry['id']}.html", html)
    write_atomically(Path(history_dir) / "latest.html", html)
    return page


def nightly_page(history: Sequence[dict[str, Any]], entry: dict[str, Any],
                 gates: Sequence[GateRow], baseline: dict[str, Any] | None
                 ) -> tuple[dict[str, Any], list[Any]]:
    from zerohop.report import formatting as fmt
    from zerohop.report.charts import Chart, Series

    same = [e for e in history if e.get("profile") == entry["profile"]]
    x = np.arange(1, len(same) + 1, dtype=float)
    charts = []
    metrics = [m for m in (entry.get("figures") or {}) if m.endswith("_ms")]
    for metric in metrics:
        def column(key: str, metric: str = metric) -> np.ndarray:
            return np.array([_num((e.get("figures") or {}).get(metric, {}).get(key))
                             for e in same])
        series = [Series("p50 (pooled)", column("p50")), Series("p90 (pooled)", column("p90"))]
        width = max((len((e.get("figures") or {}).get(metric, {}).get("sample_p50") or [])
                     for e in same), default=0)
        for i in range(width):
            series.append(Series(f"sample {i + 1} p50", np.array(
                [_num(_at((e.get("figures") or {}).get(metric, {}).get("sample_p50"), i))
                 for e in same]), "points"))
        marks = np.array([_num((e.get("figures") or {}).get(metric, {}).get("p50"))
                          if e.get("status") == "regression" else math.nan for e in same])
        if np.isfinite(marks).any():
            series.append(Series("regression", marks, "points"))
        charts.append(Chart(chart_id=f"chart-trend-{metric}", title=f"{metric} over the history",
                            kind="xy", x=x, series=series, x_label="nightly #", y_label="ms"))
    rows = [{
        "metric": g.metric, "stat": g.stat, "base": fmt.ms(g.base),
        "candidate": fmt.ms(g.candidate), "delta": fmt.signed_ms(g.delta),
        "delta_pct": fmt.signed_pct(g.delta_pct),
        "ci": f"[{fmt.signed_ms(g.ci_low)}, {fmt.signed_ms(g.ci_high)}]",
        "band": fmt.ms(g.noise_band), "bootstrap": g.bootstrap_verdict, "verdict": g.verdict,
    } for g in gates]
    history_rows = [{
        "id": e["id"], "created_at": e.get("created_at", ""), "status": e.get("status", ""),
        "baseline": e.get("baseline_id") or ("(marked)" if e.get("marked_baseline") else "—"),
        "label": e.get("label") or "",
        "regressions": ", ".join(e.get("regressions") or []) or "—",
    } for e in reversed(same)]
    status = entry["status"]
    context = {
        "title": f"zerohop nightly — {entry['profile']}",
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "status": status,
        "overall": {"regression": "fail", "pass": "ok", "improved": "ok",
                  "baseline": "none"}[status],
        "headline": headline(entry),
        "baseline_id": baseline["id"] if baseline else "—",
        "samples": entry["samples"],
        "gates": rows,
        "notes": entry.get("notes") or [],
        "compare_link": f"runs/{entry['id']}/compare.html" if baseline else "",
        "history": history_rows,
        "charts": [c.chart_id for c in charts],
        "chart_titles": {c.chart_id: c.title for c in charts},
    }
    return context, charts


def headline(entry: dict[str, Any]) -> str:
    """The verdict in one line, for the page and the console."""
    status = entry["status"]
    if status == "baseline":
        return "baseline recorded (nothing to compare with)"
    if status == "regression":
        return "REGRESSION: " + ", ".join(entry.get("regressions") or [])
    return "no regression" + (" (improved)" if status == "improved" else "")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _at(values: Any, i: int) -> Any:
    return values[i] if isinstance(values, list) and i < len(values) else None


def write_comparison_page(comparison: Any, out: Path) -> None:
    from zerohop.report.build import write_comparison

    write_comparison([comparison], out)
