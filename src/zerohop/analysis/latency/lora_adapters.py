"""Per-adapter results for LoRA mixes, with the cold start separated from warm traffic.

"Cold" is the first request sent to an adapter in the run (by send time, whatever
its outcome): the one that may pay the adapter's load time. Every later ok request
to that adapter is "warm". A server may evict and reload an adapter later in the
run; the client cannot see that, so those reloads stay inside the warm figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.quantiles import Distribution, describe
from zerohop.analysis.run_data import category_codes
from zerohop.analysis.timeseries import request_start_ts


@dataclass(frozen=True)
class AdapterSummary:
    adapter: str
    workloads: tuple[str, ...]
    requests: int
    errors: int
    cold_outcome: str
    cold_ttft_ms: float  # NaN when the cold request failed
    warm_ttft: Distribution
    warm_e2e: Distribution
    cold_over_warm_p50: float  # cold TTFT ÷ warm p50 TTFT


def summarise_adapters(requests: pd.DataFrame) -> list[AdapterSummary]:
    """One row per adapter seen in the run (by name); empty when no request named one."""
    codes, names = category_codes(requests["adapter"])
    if not (codes >= 0).any():
        return []
    start = request_start_ts(requests)
    ok = (requests["outcome"] == "ok").to_numpy()
    ttft = requests["ttft_ms"].to_numpy(dtype=float)
    e2e = requests["e2e_ms"].to_numpy(dtype=float)
    workload_codes, workload_names = category_codes(requests["workload"])
    outcome_codes, outcome_names = category_codes(requests["outcome"])
    rows = []
    for code in sorted(set(codes[codes >= 0].tolist()), key=lambda c: names[c]):
        mine = np.flatnonzero(codes == code)
        # First by send time; a request without one sorts last, ties keep file order
        # (argmin returns the first of equal minima).
        first = int(np.argmin(np.where(np.isfinite(start[mine]), start[mine], np.inf)))
        cold = int(mine[first])
        warm = np.delete(mine, first)
        warm_ok = warm[ok[warm]]
        cold_ttft = float(ttft[cold]) if ok[cold] else math.nan
        warm_ttft = describe(ttft[warm_ok])
        warm_p50 = warm_ttft.percentiles["p50"]
        rows.append(
            AdapterSummary(
                adapter=names[code],
                workloads=tuple(
                    sorted(workload_names[c] for c in np.unique(workload_codes[mine]) if c >= 0)
                ),
                requests=int(mine.size),
                errors=int((~ok[mine]).sum()),
                cold_outcome=outcome_names[outcome_codes[cold]],
                cold_ttft_ms=cold_ttft,
                warm_ttft=warm_ttft,
                warm_e2e=describe(e2e[warm_ok]),
                cold_over_warm_p50=cold_ttft / warm_p50 if warm_p50 > 0 else math.nan,
            )
        )
    return rows
