"""The results block on the console, laid out as `vllm bench serve` prints its own, so
a user coming from it finds each figure where they expect it (the values are zerohop's:
`analysis/latency/results_table.py`)."""

from __future__ import annotations

import math

from zerohop.analysis.latency.results_table import ResultsTable, table_rows

WIDTH = 50
LABEL_WIDTH = 40


def results_block_lines(table: ResultsTable) -> list[str]:
    """The block's lines: counts and rates, then one titled group per latency."""
    lines = [f"{' Results ':=^{WIDTH}}"]
    for label, unit, value in table_rows(table):
        if label.startswith("Mean "):
            lines.append(f"{' ' + label.removeprefix('Mean ') + ' ':-^{WIDTH}}")
        name = f"{label} ({unit}):" if unit else f"{label}:"
        lines.append(f"{name:<{LABEL_WIDTH}}{_value(value):>{WIDTH - LABEL_WIDTH}}")
    lines.append("=" * WIDTH)
    return lines


def _value(value: float | int | None) -> str:
    """An integer as is, a figure to 2 decimals, "-" where there is none (a percentile
    its sample is too small for, a rate without a window)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.2f}"
