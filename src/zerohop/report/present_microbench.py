"""The report's "Microbenchmarks" section: each benchmark's figures and the PCIe
bandwidth curve against the link's limit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zerohop.analysis.server.microbench import MicrobenchSummary
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, add_chart, joined


def microbench_section(mb: MicrobenchSummary | None, charts: list[Chart]
                       ) -> dict[str, Any] | None:
    """Template context (None: the run has no microbench.json), appending the PCIe
    curve's chart when there is one."""
    if mb is None:
        return None
    benchmarks = []
    for bench in mb.benchmarks:
        benchmarks.append(
            {
                "name": bench.name,
                "status": bench.status,
                "reason": bench.reason or "",
                "rows": [
                    {
                        "metric": s.metric,
                        "unit": s.unit,
                        "median": fmt.number(s.figures.get("median", s.figures.get("p50"))),
                        "p99": fmt.number(s.figures.get("p99")),
                        "min": fmt.number(s.figures.get("min")),
                        "max": fmt.number(s.figures.get("max")),
                        "n": fmt.count(s.n) if s.n is not None else fmt.DASH,
                        "description": s.description,
                    }
                    for s in bench.stats
                ],
            }
        )
    chart_id = ""
    if mb.curve:
        tables = []
        for direction, memory in dict.fromkeys((p.direction, p.memory) for p in mb.curve):
            points = [p for p in mb.curve if (p.direction, p.memory) == (direction, memory)]
            tables.append(
                (
                    f"{direction} {memory}",
                    np.array([p.size_bytes for p in points]),
                    np.array([p.gbps for p in points]),
                )
            )
        x, columns = joined(tables)
        series = [
            Series(name, column, "line")
            for (name, _, _), column in zip(tables, columns, strict=True)
        ]
        if math.isfinite(mb.link_gbps_per_direction):
            series.append(
                Series(
                    "link limit (per direction)",
                    np.full(x.size, mb.link_gbps_per_direction),
                    "dashed",
                )
            )
        chart_id = add_chart(
            charts,
            Chart(
                chart_id="pcie-curve",
                title="PCIe bandwidth vs transfer size",
                kind="xy",
                x=x,
                series=series,
                x_label="bytes per copy",
                y_label="GB/s",
                x_log=True,
                x_format="bytes",
            ),
        )
    return {
        "status": mb.status,
        "reason": mb.reason or "",
        "created_at": mb.created_at or "—",
        "environment": [{"key": k, "value": v} for k, v in mb.environment],
        "benchmarks": benchmarks,
        "curve_chart": chart_id,
        "link": fmt.gbps(mb.link_gbps_per_direction),
        "curve_rows": [
            {
                "direction": p.direction,
                "memory": p.memory,
                "size": fmt.count(p.size_bytes),
                "gbps": fmt.gbps(p.gbps),
                "pct": fmt.pct(p.pct_of_link),
                "verified": "yes" if p.verified else ("no" if p.verified is False else "—"),
            }
            for p in mb.curve
        ],
        "notes": mb.notes,
    }
