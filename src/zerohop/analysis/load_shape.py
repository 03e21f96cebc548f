"""What load each workload really had, read from its records: open loop (its requests
carry a scheduled time) at so many arrivals a second, or closed loop with at most so
many requests in flight (its users, less any that were thinking). The manifest's `load`
is the run's flags (`closed, 5 users` when no --rate was given), which says nothing of
the open-loop workloads a file runs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from zerohop.analysis.measured_window import MeasuredWindow


@dataclass(frozen=True)
class WorkloadLoad:
    workload: str
    mode: Literal["open", "closed"]
    arrivals_per_s: float  # records (each standing for `weight` requests) ÷ the window
    peak_in_flight: int  # closed loop: the most requests in flight at once (0: open)


def workload_loads(requests: pd.DataFrame, window: MeasuredWindow) -> list[WorkloadLoad]:
    """One entry per workload, in the records' order of first appearance."""
    loads = []
    for name, rows in requests.groupby("workload", sort=False):
        scheduled = np.isfinite(rows["scheduled_ts"].to_numpy(dtype=float)).any()
        rate = window.rate(len(rows)) if window.duration_s else math.nan
        peak = 0 if scheduled else _peak_in_flight(rows)
        loads.append(WorkloadLoad(str(name), "open" if scheduled else "closed", rate, peak))
    return loads


def _peak_in_flight(rows: pd.DataFrame) -> int:
    """The most requests between their send and their end at one instant (an end
    counted before a send at the same time: a user's next request follows its last)."""
    sent = rows["sent_ts"].to_numpy(dtype=float)
    end = rows["end_ts"].to_numpy(dtype=float)
    keep = np.isfinite(sent) & np.isfinite(end)
    if not keep.any():
        return 0
    times = np.concatenate((end[keep], sent[keep]))
    steps = np.concatenate((np.full(keep.sum(), -1), np.full(keep.sum(), 1)))
    order = np.lexsort((steps, times))  # by time, an end (-1) before a send (+1)
    return int(np.cumsum(steps[order]).max())
