"""Service-level objectives: parse the manifest's `slo` block, judge each one, and
decide which requests were "good" for goodput.

An SLO key names a metric, a statistic and a unit: `ttft_p99_ms: 500` means "p99
TTFT at most 500 ms". The statistic is what the run is judged on; the threshold is
also what one request must meet to count as good (a request with no TPOT — a
one-token answer — passes the TPOT objective; for ITL the request's largest gap is
what must meet it). Goodput counts only `ok` requests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import ItlColumn

SLO_METRICS: tuple[str, ...] = (
    "ttft_from_schedule",
    "e2e_from_schedule",
    "ttft",
    "tpot",
    "itl",
    "e2e",
)
_SLO_KEY = re.compile(
    r"^(?P<metric>" + "|".join(SLO_METRICS) + r")_(?P<stat>p\d+(?:[._]\d+)?|mean|max)_ms$"
)


@dataclass(frozen=True)
class SloTarget:
    key: str
    column: str  # request column, e.g. "ttft_ms"
    statistic: str  # "p99", "p99.9", "mean" or "max"
    threshold_ms: float


@dataclass(frozen=True)
class SloResult:
    target: SloTarget
    observed_ms: float
    met: bool | None  # None: no data to judge


def parse_slos(slo: Mapping[str, Any] | None) -> tuple[list[SloTarget], list[str]]:
    """Targets from the manifest's `slo` mapping, plus a note per key not understood
    (reported on the page rather than silently ignored)."""
    targets: list[SloTarget] = []
    notes: list[str] = []
    for key, value in (slo or {}).items():
        match = _SLO_KEY.match(str(key))
        if match is None:
            notes.append(f"SLO {key!r} not understood (expected e.g. ttft_p99_ms): ignored")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            notes.append(f"SLO {key!r} has no positive number ({value!r}): ignored")
            continue
        targets.append(
            SloTarget(
                key=str(key),
                column=f"{match['metric']}_ms",
                statistic=_normalise_statistic(match["stat"]),
                threshold_ms=float(value),
            )
        )
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


def _normalise_statistic(stat: str) -> str:
    """`p999` and `p99_9` both mean p99.9; `p99` stays."""
    if stat in ("mean", "max"):
        return stat
    digits = stat[1:].replace("_", ".")
    if "." not in digits and len(digits) > 2:
        digits = digits[:2] + "." + digits[2:]
    return f"p{digits}"
