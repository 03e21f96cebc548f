"""Errors by outcome, with a few sample messages each.

Messages come from the server and may contain anything, markup included; they are
carried as plain strings and only ever shown through autoescaping (never as HTML).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import category_codes
from zerohop.analysis.timeseries import request_start_ts


@dataclass(frozen=True)
class OutcomeCount:
    outcome: str
    count: int
    pct: float  # of all attempts


@dataclass(frozen=True)
class ErrorSample:
    outcome: str
    message: str
    count: int  # attempts with this outcome and exactly this message
    first_seen_s: float  # seconds since the run's origin
    http_status: int | None


def outcome_counts(requests: pd.DataFrame) -> list[OutcomeCount]:
    """Every outcome (ok first, then by count) with its share of attempts."""
    codes, names = category_codes(requests["outcome"])
    counts = np.bincount(codes[codes >= 0], minlength=len(names))
    total = int(counts.sum())
    present = [(names[i], int(n)) for i, n in enumerate(counts) if n]
    ordered = sorted(present, key=lambda kv: (kv[0] != "ok", -kv[1], kv[0]))
    return [
        OutcomeCount(name, n, 100.0 * n / total if total else float("nan")) for name, n in ordered
    ]


def error_samples(requests: pd.DataFrame, t0: float, *, per_outcome: int = 3) -> list[ErrorSample]:
    """Up to `per_outcome` distinct messages per failed outcome, most frequent first."""
    failed = np.flatnonzero((requests["outcome"] != "ok").to_numpy())
    if failed.size == 0:
        return []
    subset = requests.iloc[failed]
    frame = pd.DataFrame(
        {
            "outcome": subset["outcome"].astype(object).to_numpy(),
            "message": _messages(subset),
            "start": request_start_ts(subset),
            "status": subset["http_status"].to_numpy(dtype=float),
        }
    )
    grouped = frame.groupby(["outcome", "message"], sort=False, dropna=False).agg(
        count=("start", "size"), first=("start", "min"), status=("status", "first")
    )
    grouped = grouped.reset_index().sort_values(
        ["outcome", "count", "first"], ascending=[True, False, True]
    )
    samples = []
    for _, part in grouped.groupby("outcome", sort=True):
        for row in part.head(per_outcome).itertuples(index=False):
            status = None if np.isnan(row.status) else int(row.status)
            samples.append(
                ErrorSample(
                    outcome=str(row.outcome),
                    message=str(row.message),
                    count=int(row.count),
                    first_seen_s=float(row.first - t0),
                    http_status=status,
                )
            )
    return samples


def _messages(requests: pd.DataFrame) -> np.ndarray:
    """The error message, else the error type, else a dash: never empty."""
    message = requests["error_message"].astype(object)
    kind = requests["error_type"].astype(object)
    chosen = message.where(message.notna() & (message != ""), kind)
    return chosen.where(chosen.notna() & (chosen != ""), "(no message)").astype(str).to_numpy()
