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
from zerohop.analysis.run_data import category_codes


@dataclass(frozen=True)
class WorkloadLoad:
    workload: str
    mode: Literal["open", "closed"]
    arrivals_per_s: float  # records (each standing for `weight` requests) ÷ the window
    peak_in_flight: int  # closed loop: the most requests in flight at once (0: open)


def workload_loads(requests: pd.DataFrame, window: MeasuredWindow) -> list[WorkloadLoad]:
    """One entry per workload, in the records' order of first appearance (selected by
    category code: a group-by would copy every column of every workload)."""
    codes, names = category_codes(requests["workload"])
    present, first = np.unique(codes[codes >= 0], return_index=True)
    scheduled = np.isfinite(requests["scheduled_ts"].to_numpy(dtype=float))
    sent = requests["sent_ts"].to_numpy(dtype=float)
    end = requests["end_ts"].to_numpy(dtype=float)
    loads = []
    for code in present[np.argsort(first, kind="stable")]:
        rows = codes == code
        n = int(np.count_nonzero(rows))
        rate = window.rate(n) if window.duration_s else math.nan
        is_open = bool(scheduled[rows].any())
        peak = 0 if is_open else _peak_in_flight(sent[rows], end[rows])
        loads.append(WorkloadLoad(names[code], "open" if is_open else "closed", rate, peak))
    return loads


def _peak_in_flight(sent: np.ndarray, end: np.ndarray) -> int:
    """The most requests between their send and their end at one instant (an end
    counted before a send at the same time: a user's next request follows its last)."""
    keep = np.isfinite(sent) & np.isfinite(end)
    if not keep.any():
        return 0
    times = np.concatenate((end[keep], sent[keep]))
    steps = np.concatenate((np.full(keep.sum(), -1), np.full(keep.sum(), 1)))
    order = np.lexsort((steps, times))  # by time, an end (-1) before a send (+1)
    return int(np.cumsum(steps[order]).max())
