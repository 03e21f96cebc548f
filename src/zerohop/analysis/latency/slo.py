"""Service-level objectives: read the manifest's `slo` block, judge each one, and
decide which requests were "good" for goodput.

The keys and values are those of the one SLO grammar (`core.slo`): `ttft_p99_ms: 500`
means "p99 TTFT at most 500 ms". The statistic is what the run is judged on; the
threshold is also what one request must meet to count as good (a request with no TPOT —
a one-token answer — passes the TPOT objective; for ITL the request's largest gap is
what must meet it). Goodput counts only `ok` requests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import ItlColumn
from zerohop.core.slo import SloError, SloTarget, add_target, parse_target

__all__ = ["SloResult", "SloTarget", "evaluate_slos", "good_mask", "parse_slos", "statistic_of"]


@dataclass(frozen=True)
class SloResult:
    target: SloTarget
    observed_ms: float
    met: bool | None  # None: no data to judge
    workload: str | None = None  # a workload's own objective; None: the run's (--slo)

    @property
    def label(self) -> str:
        """The objective as a reader names it: `ttft_p99_ms`, or `flood: ttft_p99_ms`."""
        return f"{self.workload}: {self.target.key}" if self.workload else self.target.key


def parse_slos(slo: Mapping[str, Any] | None) -> tuple[list[SloTarget], list[str]]:
    """Targets from the manifest's `slo` mapping, plus a note per objective not in the
    grammar (reported on the page rather than failing a report of a finished run)."""
    targets: list[SloTarget] = []
    notes: list[str] = []
    for key, value in (slo or {}).items():
        try:
            add_target(targets, parse_target(str(key), value))
        except SloError as exc:
            notes.append(f"{exc}: ignored")
    return targets, notes


def good_mask(requests: pd.DataFrame, itl: ItlColumn, targets: list[SloTarget]) -> np.ndarray:
    """True for each request that is `ok` and meets every SLO threshold."""
    good = (requests["outcome"] == "ok").to_numpy().copy()
    itl_max: np.ndarray | None = None
    for target in targets:
        if target.column == "itl_ms":
            if itl_max is None:
                itl_max = itl.row_max()
            values = itl_max
        else:
            values = requests[target.column].to_numpy(dtype=float)
        # A missing value means "not applicable" (no TPOT for one token): it passes.
        with np.errstate(invalid="ignore"):
            good &= ~(values > target.threshold_ms)
    return good


def evaluate_slos(targets: list[SloTarget], ok_values: Mapping[str, np.ndarray]) -> list[SloResult]:
    """Judge each target on the run-wide values of its metric (`ok` requests only;
    `ok_values["itl_ms"]` is the pooled gaps)."""
    results = []
    for target in targets:
        values = np.asarray(ok_values.get(target.column, np.array([])), dtype=float)
        observed = statistic_of(values[np.isfinite(values)], target.statistic)
        met = None if math.isnan(observed) else observed <= target.threshold_ms
        results.append(SloResult(target=target, observed_ms=observed, met=met))
    return results


def statistic_of(values: np.ndarray, statistic: str) -> float:
    """`p<q>`, `mean` or `max` of finite values; NaN when there are none."""
    if values.size == 0:
        return math.nan
    if statistic == "mean":
        return float(values.mean())
    if statistic == "max":
        return float(values.max())
    return float(np.percentile(values, float(statistic[1:])))

