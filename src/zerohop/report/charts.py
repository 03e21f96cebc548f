"""Chart specifications: what to draw, as plain data for the page's small script.

Python decides everything — series, units, downsampling, axis ranges — and the page's
JavaScript only hands each spec to uPlot. Specs go into the page as JSON inside a
`<script type="application/json">` element; `encode_for_html` escapes `<`, `>` and
`&` so no string in the data (a server's error message, an adapter name) can close
that element or be read as markup.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

SIGNIFICANT_DIGITS = 5
ChartKind = Literal["time", "xy", "scatter"]


@dataclass(frozen=True)
class Series:
    label: str
    values: np.ndarray
    style: Literal["line", "points", "step", "dashed"] = "line"
    full_label: str | None = None  # shown on hover when the legend's label is a brief one


@dataclass(frozen=True)
class Chart:
    """One uPlot chart over a shared x array. `kind="time"` charts share the run's
    time axis (seconds since start, fixed range, synchronised cursors)."""

    chart_id: str
    title: str
    kind: ChartKind
    x: np.ndarray
    series: list[Series]
    x_label: str
    y_label: str
    x_log: bool = False
    x_format: Literal["number", "bytes"] = "number"
    x_range: tuple[float, float] | None = None
    y_min_zero: bool = True
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.chart_id,
            "title": self.title,
            "kind": self.kind,
            "xLabel": self.x_label,
            "yLabel": self.y_label,
            "xLog": self.x_log,
            "xFormat": self.x_format,
            "xRange": list(self.x_range) if self.x_range else None,
            "yMinZero": self.y_min_zero,
            "x": compact(self.x),
            "series": [
                {
                    "label": s.label,
                    "full": s.full_label or s.label,
                    "style": s.style,
                    "values": compact(s.values),
                }
                for s in self.series
            ],
        }


def joined(
    tables: Sequence[tuple[str, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Put series with different x values on one shared, sorted x array (NaN where a
    series has no point): uPlot's aligned-data form, done here rather than in JS."""
    xs = [np.asarray(x, dtype=float) for _, x, _ in tables]
    union = np.unique(np.concatenate(xs)) if xs else np.array([])
    columns = []
    for (_, _, y), x_arr in zip(tables, xs, strict=True):
        column = np.full(union.size, np.nan)
        order = np.argsort(x_arr, kind="stable")
        positions = np.searchsorted(union, x_arr[order])
        column[positions] = np.asarray(y, dtype=float)[order]
        columns.append(column)
    return union, columns


def compact(values: np.ndarray | Sequence[float]) -> list[float | None]:
    """Floats rounded to SIGNIFICANT_DIGITS, NaN/inf as null: a smaller page and valid
    JSON (JSON has no NaN)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return []
    finite = np.isfinite(arr)
    rounded = np.zeros_like(arr)
    nonzero = finite & (arr != 0)
    if nonzero.any():
        magnitude = np.floor(np.log10(np.abs(arr[nonzero])))
        scale = 10.0 ** (SIGNIFICANT_DIGITS - 1 - magnitude)
        rounded[nonzero] = np.round(arr[nonzero] * scale) / scale
    out: list[float | None] = rounded.tolist()
    for i in np.flatnonzero(~finite):
        out[int(i)] = None
    return out


def encode_for_html(payload: Any) -> str:
    """JSON text safe inside a <script type="application/json"> element."""
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def add_chart(charts: list[Chart], chart: Chart) -> str:
    """Register a chart under a unique `chart-` id (never a section's id); returns
    the id the template uses."""
    taken = {c.chart_id for c in charts}
    base = f"chart-{chart.chart_id}"
    chart_id, i = base, 2
    while chart_id in taken:
        chart_id, i = f"{base}-{i}", i + 1
    charts.append(dataclasses.replace(chart, chart_id=chart_id))
    return chart_id
