"""TTFT per workload, as its own table beside Locust's headless statistics.

Locust's tables count requests: each request is one entry there (its E2E), so their
counts and RPS are the run's. TTFT is a second latency of the same request, not a
second request, so it is printed here, after the run, from the records' exact values
(the same percentiles the report computes), through Locust's own stats logger.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from zerohop.analysis.quantiles import describe
from zerohop.core.layout import REQUESTS_FILE

STATS_LOGGER = "locust.stats_logger"  # Locust's own logger for its tables
PERCENTILES = ("p50", "p90", "p99")


def ttft_table_lines(run_dir: Path) -> list[str]:
    """The table's lines: one row per workload, then `Aggregated` when there are
    several; ok requests only, as in the report. Empty when nothing has a TTFT.
    pyarrow loads here, once the run has ended: a Locust worker never loads it."""
    import pyarrow.parquet as pq

    path = run_dir / REQUESTS_FILE
    if not path.is_file():
        return []
    table = pq.read_table(path, columns=["workload", "outcome", "ttft_ms"]).to_pydict()
    ok = np.array([o == "ok" for o in table["outcome"]], dtype=bool)
    ttft = np.array([np.nan if v is None else v for v in table["ttft_ms"]], dtype=float)
    workloads = np.array([str(w) for w in table["workload"]], dtype=object)
    names = sorted(set(workloads[ok]))
    rows = [(name, ttft[ok & (workloads == name)]) for name in names]
    if len(rows) > 1:
        rows.append(("Aggregated", ttft[ok]))
    rows = [(name, values) for name, values in rows if np.isfinite(values).any()]
    if not rows:
        return []
    head = f"{'TTFT (ms), ok requests':<40}{'n':>9}" + "".join(f"{p:>10}" for p in PERCENTILES)
    lines = [head, "-" * len(head)]
    for name, values in rows:
        dist = describe(values)
        lines.append(f"{name[:39]:<40}{dist.n:>9}"
                     + "".join(f"{dist.get(p):>10.1f}" for p in PERCENTILES))
    return lines


def log_ttft_table(environment: Any, run_dir: Path) -> None:
    """Print the table where Locust prints its own, in a headless run (the web UI has
    its zerohop tab)."""
    if not getattr(getattr(environment, "parsed_options", None), "headless", False):
        return
    lines = ttft_table_lines(run_dir)
    if lines:
        logging.getLogger(STATS_LOGGER).info("\n".join(["", *lines, ""]))
