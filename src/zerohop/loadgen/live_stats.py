"""Exact TTFT / TPOT / ITL percentiles per workload while a run is going, for the zerohop
tab of Locust's web UI (web_tab.py).

Locust's own tables round response times into buckets (those stay Locust's, for E2E);
this keeps every value of the records the master (or the local runner) has received and
computes the percentiles with the report's own routine (`analysis.quantiles.describe`,
numpy's linear interpolation), so the tab's p99 is the same p99 the report computes
from the same records. Successful requests only (`outcome == "ok"`), as in the report's
latency tables; failures are counted beside them. Values are kept in `array('d')`
(8 bytes each); the table is recomputed only when new records arrived since it was
last asked for, i.e. at most once per UI poll, and only in a process that has a web UI.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zerohop.analysis.quantiles import PERCENTILES as REPORT_PERCENTILES
from zerohop.analysis.quantiles import describe
from zerohop.core.metrics import REQUEST_LATENCIES

# E2E is Locust's own response time, in its own tables; the tab adds the other latencies.
METRICS: tuple[str, ...] = tuple(n.removesuffix("_ms") for n in REQUEST_LATENCIES if n != "e2e_ms")
# three of the report's percentiles: the tab's columns
PERCENTILES: tuple[tuple[str, float], ...] = tuple(
    (name, q) for name, q in REPORT_PERCENTILES if name in ("p50", "p90", "p99"))
ALL_WORKLOADS = "All workloads"


@dataclass
class _Workload:
    requests: int = 0
    failed: int = 0
    values: dict[str, array] = field(
        default_factory=lambda: {name: array("d") for name in METRICS})


class LiveLatencies:
    """Per-workload exact latency values of the records received so far."""

    def __init__(self) -> None:
        self._workloads: dict[str, _Workload] = {}
        self._version = 0  # bumped by every add
        self._cached: tuple[int, list[dict[str, Any]]] = (-1, [])

    def add(self, row: Mapping[str, Any]) -> None:
        """One record row (`RequestRecord.to_row()`)."""
        workload = self._workloads.setdefault(str(row.get("workload") or "?"), _Workload())
        workload.requests += 1
        self._version += 1
        if row.get("outcome") != "ok":
            workload.failed += 1
            return
        values = workload.values
        for name in ("ttft", "tpot"):
            value = row.get(f"{name}_ms")
            if isinstance(value, (int, float)):
                values[name].append(float(value))
        itl = row.get("itl_ms")
        if itl:
            values["itl"].extend(float(v) for v in itl)

    def add_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.add(row)

    @property
    def requests(self) -> int:
        return sum(w.requests for w in self._workloads.values())

    def table(self) -> list[dict[str, Any]]:
        """One row per workload (sorted by name), then an "All workloads" row when there
        is more than one: `workload`, `requests`, `failed`, and `<metric>_<pNN>` in ms
        (None where the metric has no value yet)."""
        version, rows = self._cached
        if version == self._version:
            return rows
        rows = [self._row(name, [w]) for name, w in sorted(self._workloads.items())]
        if len(self._workloads) > 1:
            rows.append(self._row(ALL_WORKLOADS, list(self._workloads.values())))
        self._cached = (self._version, rows)
        return rows

    @staticmethod
    def _row(name: str, workloads: list[_Workload]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "workload": name,
            "requests": sum(w.requests for w in workloads),
            "failed": sum(w.failed for w in workloads),
        }
        for metric in METRICS:
            parts = [np.frombuffer(w.values[metric], dtype=np.float64)
                     for w in workloads if len(w.values[metric])]
            if not parts:
                row.update({f"{metric}_{p}": None for p, _ in PERCENTILES})
                continue
            found = describe(np.concatenate(parts))
            row.update({f"{metric}_{p}": found.get(p) for p, _ in PERCENTILES})
        return row
